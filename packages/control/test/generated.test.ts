import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const pkg = fileURLToPath(new URL('..', import.meta.url));
const COMMITTED = 'src/generated';

function files(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    out.set(relative(dir, path), readFileSync(path, 'utf8'));
  }
  return out;
}

test('the committed message types are what the generate script makes from control.proto now', (t) => {
  const { scripts } = JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')) as {
    scripts: { generate: string };
  };
  // The script's own generator command and flags, into a folder of the test's.
  const command = scripts.generate.split('&&').at(-1)!.trim();
  assert.ok(command.includes(`--outDir=${COMMITTED} `), command);
  const out = mkdtempSync(join(tmpdir(), 'control-types-'));
  t.after(() => rmSync(out, { recursive: true, force: true }));
  const run = spawnSync('sh', ['-c', command.replace(`--outDir=${COMMITTED}`, `--outDir=${out}`)], {
    cwd: pkg,
    encoding: 'utf8',
    env: { ...process.env, PATH: `${join(pkg, 'node_modules/.bin')}:${process.env.PATH}` },
  });
  assert.equal(run.status, 0, run.stderr);
  const fresh = files(out);
  const committed = files(join(pkg, COMMITTED));
  assert.deepEqual(
    [...committed.keys()].sort(),
    [...fresh.keys()].sort(),
    'run `pnpm --filter @taskline/control generate`',
  );
  for (const [path, text] of fresh)
    assert.equal(
      committed.get(path),
      text,
      `${path} is stale: run \`pnpm --filter @taskline/control generate\``,
    );
});
