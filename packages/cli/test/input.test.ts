/**
 * Mistakes in flags and configuration: exit 2 and a message that says what to fix, found before
 * anything is sent. In process, with nothing listening at the URLs given: a check that is missing
 * shows up as another exit code, never as a request reaching a real server or Redis.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { EXIT, resolveConfig, runCli } from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'taskline-input-'));
/** Port 9 (discard): nothing listens there. */
const NOWHERE = { TASKLINE_URL: 'http://127.0.0.1:9', REDIS_URL: 'redis://127.0.0.1:9' };

async function taskline(argv: string[], env: Record<string, string> = {}) {
  let stderr = '';
  const err = new PassThrough();
  err.on('data', (d) => (stderr += d));
  const out = new PassThrough().resume();
  const code = await runCli(argv, {
    stdout: out,
    stderr: err,
    stdin: new PassThrough(),
    env: {
      XDG_CONFIG_HOME: dir,
      XDG_STATE_HOME: dir,
      TASKLINE_API_KEY: 'key-0123456789',
      ...NOWHERE,
      ...env,
    },
  });
  return { code, stderr };
}

async function refused(argv: string[], message: RegExp, env: Record<string, string> = {}) {
  const r = await taskline(argv, env);
  assert.equal(r.code, EXIT.usage, `${JSON.stringify(argv)}: ${r.stderr}`);
  assert.match(r.stderr, message);
  assert.equal(r.stderr.trim().split('\n').length, 1, `one line: ${r.stderr}`);
}

test('a task database that cannot be opened is a config error (2), not an internal one', async () => {
  await refused(['--state', dir, 'tasks', 'get', 'task_x'], /--state/);
  await refused(['--state', '/etc/passwd/x.db', 'tasks', 'get', 'task_x'], /--state/);
  await refused(['tasks', 'resume'], /TASKLINE_STATE/, { TASKLINE_STATE: dir });
});

test('a Redis URL that is not one is a config error (2)', async () => {
  await refused(['--redis-url', 'notaurl', 'keys', 'list'], /--redis-url/);
  await refused(['keys', 'list'], /REDIS_URL/, { REDIS_URL: 'http://127.0.0.1:9' });
});

test('an empty task id or an API key no header can carry is a usage error (2), never sent', async () => {
  await refused(['tasks', 'get', ''], /task id/);
  await refused(['tasks', 'watch', ' '], /task id/);
  await refused(['keys', 'revoke', ''], /key id/);
  await refused(['--api-key', 'k\nX: 1', 'tasks', 'get', 'task_x'], /--api-key/);
  const r = await taskline(['tasks', 'get', 'task_x'], { TASKLINE_API_KEY: 'secret-key 1' });
  assert.equal(r.code, EXIT.usage);
  assert.doesNotMatch(r.stderr, /secret/, 'the key itself is never printed');
});

test('keys refuses a tenant id it cannot store and a name that would break keys list (2)', async () => {
  await refused(['keys', 'create', '--tenant', 'bad tenant'], /--tenant/);
  await refused(['keys', 'list', '--tenant', 'a{b}'], /--tenant/);
  await refused(['keys', 'create', '--tenant', 't', '--name', 'a\nb'], /--name/);
  await refused(['keys', 'create', '--tenant', 't', '--name', 'a\u2028b'], /--name/);
});

test('keys needs REDIS_URL or --redis-url: no default that could be some other Redis (2)', async () => {
  // Checked first: without the fix, the command below would connect to a Redis on 6379.
  assert.equal(resolveConfig({}, { XDG_CONFIG_HOME: dir }).redisUrl, undefined);
  await refused(['keys', 'list'], /REDIS_URL/, { REDIS_URL: '' });
});

test(
  'Ctrl-C while run - reads the prompt from stdin stops it (130): nothing was created',
  { timeout: 10_000 },
  async () => {
    const controller = new AbortController();
    let stderr = '';
    const err = new PassThrough();
    err.on('data', (d) => (stderr += d));
    const stdin = new PassThrough();
    stdin.write('half a prompt'); // the user has not typed Ctrl-D yet
    setTimeout(() => controller.abort(), 100);
    const code = await runCli(['run', '-'], {
      stdout: new PassThrough().resume(),
      stderr: err,
      stdin,
      env: { XDG_CONFIG_HOME: dir, XDG_STATE_HOME: dir, TASKLINE_API_KEY: 'key-0123456789', ...NOWHERE },
      signal: controller.signal,
    });
    assert.equal(code, EXIT.interrupted, stderr);
    assert.match(stderr, /interrupted/);
  },
);

test('a URL with a user name or password is a usage error (2) that never prints the password', async () => {
  for (const url of ['http://user:s3cret@127.0.0.1:9', 'http://s3cret@127.0.0.1:9']) {
    await refused(['--url', url, 'tasks', 'get', 'task_x'], /--url/);
    assert.doesNotMatch((await taskline(['--url', url, 'tasks', 'get', 'task_x'])).stderr, /s3cret/);
  }
});

test("keys never prints the Redis URL's password, whether the URL is refused or Redis is unreachable", async () => {
  const down = await taskline(['keys', 'list'], { REDIS_URL: 'redis://default:s3cret@127.0.0.1:9' });
  assert.equal(down.code, EXIT.unavailable, down.stderr);
  assert.match(down.stderr, /127\.0\.0\.1:9/);
  assert.doesNotMatch(down.stderr, /s3cret/);
  await refused(['keys', 'list'], /REDIS_URL/, { REDIS_URL: 'http://default:s3cret@127.0.0.1:9' });
  const wrong = await taskline(['keys', 'list'], { REDIS_URL: 'http://default:s3cret@127.0.0.1:9' });
  assert.doesNotMatch(wrong.stderr, /s3cret/);
});

test('an empty --temperature is a usage error (2), not a temperature of 0', async () => {
  await refused(['run', '--temperature', '', 'x'], /--temperature/);
  await refused(['run', '--temperature', ' ', 'x'], /--temperature/);
});

test('retries are a whole number from a flag, the environment or the config file; 0 fails at once', async () => {
  await refused(['--retries', '1.5', 'tasks', 'get', 'task_x'], /--retries/);
  await refused(['tasks', 'get', 'task_x'], /TASKLINE_RETRIES/, { TASKLINE_RETRIES: 'many' });
  const file = join(dir, 'retries.json');
  writeFileSync(file, JSON.stringify({ retries: 2 }));
  const env = { XDG_CONFIG_HOME: dir, TASKLINE_CONFIG: file };
  assert.equal(resolveConfig({}, env).retries, 2);
  assert.equal(resolveConfig({}, { ...env, TASKLINE_RETRIES: '0' }).retries, 0);
  assert.equal(resolveConfig({ retries: '7' }, env).retries, 7);
  assert.equal(resolveConfig({}, { XDG_CONFIG_HOME: dir }).retries, 5);
});

test('the state retention is whole seconds from a flag, the environment or the config file', async () => {
  await refused(['--state-retention', '1.5', 'tasks', 'get', 'task_x'], /--state-retention/);
  await refused(['--state-retention', '', 'tasks', 'get', 'task_x'], /--state-retention/);
  await refused(['tasks', 'get', 'task_x'], /TASKLINE_STATE_RETENTION_S/, {
    TASKLINE_STATE_RETENTION_S: '1d',
  });
  const file = join(dir, 'retention.json');
  writeFileSync(file, JSON.stringify({ stateRetention: 3600 }));
  assert.equal(resolveConfig({}, { XDG_CONFIG_HOME: dir, TASKLINE_CONFIG: file }).stateRetentionS, 3600);
  writeFileSync(file, JSON.stringify({ stateRetention: '600' }));
  const env = { XDG_CONFIG_HOME: dir, TASKLINE_CONFIG: file };
  assert.equal(resolveConfig({}, env).stateRetentionS, 600);
  assert.equal(resolveConfig({}, { ...env, TASKLINE_STATE_RETENTION_S: '0' }).stateRetentionS, 0);
  assert.equal(resolveConfig({ stateRetention: '7' }, env).stateRetentionS, 7);
  // Unset: as long as the server keeps a task that ended (TASKLINE_TASK_RETENTION_S, 24 h).
  assert.equal(resolveConfig({}, { XDG_CONFIG_HOME: dir }).stateRetentionS, 86_400);
  writeFileSync(file, JSON.stringify({ stateRetention: -1 }));
  await refused(['tasks', 'get', 'task_x'], /stateRetention/, { TASKLINE_CONFIG: file });
});
