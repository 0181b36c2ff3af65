/** `taskline --version` prints the CLI package's version, without config, server or store. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { EXIT, runCli } from '../src/index.js';

async function run(argv: string[]): Promise<{ code: number; stdout: string }> {
  const out = new PassThrough();
  let stdout = '';
  out.on('data', (d: Buffer) => (stdout += d.toString()));
  // No URL, key or store: --version needs none of them.
  const code = await runCli(argv, {
    stdout: out,
    stderr: new PassThrough(),
    stdin: new PassThrough(),
    env: {},
  });
  return { code, stdout };
}

const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

test('taskline --version prints the version, as text or with --json as JSON', async () => {
  assert.deepEqual(await run(['--version']), { code: EXIT.ok, stdout: `taskline ${version}\n` });
  const json = await run(['--json', '--version']);
  assert.equal(json.code, EXIT.ok);
  assert.deepEqual(JSON.parse(json.stdout), { version });
});
