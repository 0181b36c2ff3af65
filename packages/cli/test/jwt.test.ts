/**
 * The task store under JWT bearer tokens: a token renewed (new `iat`, `exp`, `jti`) for the same
 * issuer, subject and tenant still finds the entries of the one before, and entries an older CLI
 * keyed by the raw token's hash are taken over by that token's identity.
 */
import assert from 'node:assert/strict';
import { createSign, generateKeyPairSync } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import Database from 'better-sqlite3';
import { tokenHashId } from '@taskline/client';
import { EXIT } from '../src/index.js';
import { LONG_INPUT, startClientStack, until, type Stack } from '@taskline/test-support/client-stack';
import { cliRunner } from './spawn.js';

const ISSUER = 'https://idp.test';
const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

/** An RS256 JWT as an identity provider issues it; `jti` and the times differ per token. */
function jwt(claims: Record<string, unknown>, n: number): string {
  const now = Math.floor(Date.now() / 1000);
  const body = `${b64({ alg: 'RS256', typ: 'JWT' })}.${b64({
    iss: ISSUER,
    aud: 'taskline',
    sub: 'alice',
    tenant: 'tenant-j',
    iat: now - n,
    exp: now + 3600 + n,
    jti: `token-${n}`,
    ...claims,
  })}`;
  return `${body}.${createSign('RSA-SHA256').update(body).sign(privateKey).toString('base64url')}`;
}

let stack: Stack;
let dir: string;
const { cli, finished } = cliRunner(() => ({
  XDG_CONFIG_HOME: dir,
  TASKLINE_URL: stack.base,
  TASKLINE_STATE: join(dir, 'tasks.db'),
}));
const longArgs = [
  'run',
  '--max-output-tokens',
  String(LONG_INPUT.max_output_tokens),
  '--seed',
  String(LONG_INPUT.seed),
  LONG_INPUT.input,
];

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'taskline-jwt-'));
  stack = await startClientStack('60', {
    TASKLINE_JWT_PUBLIC_KEY: publicKey
      .export({ type: 'spki', format: 'pem' })
      .toString()
      .replace(/\n/g, '\\n'),
    TASKLINE_JWT_ISSUER: ISSUER,
    TASKLINE_JWT_AUDIENCE: 'taskline',
  });
});
after(async () => {
  await stack.stop();
});

/** Starts a long task with `token` and detaches (Ctrl-C): the task runs on, its entry unfinished. */
async function detached(token: string): Promise<string> {
  const run = cli(longArgs, { TASKLINE_API_KEY: token });
  const id = await until('the task id on stderr', () => /task (task_\S+)/.exec(run.stderr)?.[1]);
  run.child.kill('SIGINT');
  assert.equal(await run.done, EXIT.interrupted, run.stderr);
  return id;
}

test("a renewed JWT resumes the tasks of the one before; an older CLI's entries move to its identity", async () => {
  const first = jwt({}, 1);
  const renewed = jwt({}, 2);
  const rotated = await detached(first);
  const older = await detached(first);
  // What an older CLI wrote: the entry keyed by a hash of the raw token.
  const db = new Database(join(dir, 'tasks.db'));
  db.prepare('UPDATE tasks SET credential = ? WHERE task_id = ?').run(tokenHashId(first), older);
  db.close();

  const other = await finished(['tasks', 'resume'], { TASKLINE_API_KEY: jwt({ sub: 'bob' }, 3) });
  assert.equal(other.code, EXIT.ok, other.stderr);
  assert.match(other.stderr, /no unfinished tasks/, 'another subject of the tenant follows none of them');

  const afterRotation = await finished(['tasks', 'resume'], { TASKLINE_API_KEY: renewed });
  assert.equal(afterRotation.code, EXIT.ok, afterRotation.stderr);
  assert.match(afterRotation.stderr, new RegExp(`resuming ${rotated}`), 'the renewed token finds its task');

  // The older CLI's entry is found once the token it was keyed by is used again, and from then
  // on under the identity, which the renewed token shares.
  const migrated = await finished(['tasks', 'resume'], { TASKLINE_API_KEY: first });
  assert.equal(migrated.code, EXIT.ok, migrated.stderr);
  assert.match(migrated.stderr, new RegExp(`resuming ${older}`));
  assert.match(
    (await finished(['tasks', 'resume'], { TASKLINE_API_KEY: renewed })).stderr,
    /no unfinished tasks/,
  );
});
