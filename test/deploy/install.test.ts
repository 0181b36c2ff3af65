/**
 * A plain `pnpm install` keeps onnxruntime-node's bundled CPU build: its install script would
 * otherwise download the CUDA binaries. The GPU image asks for them and gets them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { ROOT } from './promql.js';

/** onnxruntime-node's own reading of its install flag, under the env pnpm gives lifecycle scripts. */
function installFlag(env: NodeJS.ProcessEnv): unknown {
  const require = createRequire(join(ROOT, 'packages/inference/package.json'));
  const utils = join(dirname(require.resolve('onnxruntime-node/package.json')), 'script/install-utils.js');
  const dir = mkdtempSync(join(tmpdir(), 'taskline-npmrc-'));
  try {
    copyFileSync(join(ROOT, '.npmrc'), join(dir, '.npmrc'));
    const script = `console.log(JSON.stringify(require(${JSON.stringify(utils)}).parseInstallFlag() ?? null))`;
    writeFileSync(join(dir, 'flag.cjs'), script);
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({ name: 'x', scripts: { flag: 'node flag.cjs' } }),
    );
    const out = execFileSync('pnpm', ['run', '--silent', 'flag'], { cwd: dir, env, encoding: 'utf8' });
    return JSON.parse(out.trim().split('\n').pop()!);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const plain = () => {
  const env = { ...process.env };
  delete env.ONNXRUNTIME_NODE_INSTALL;
  delete env.ONNXRUNTIME_NODE_INSTALL_CUDA;
  return env;
};

test("a plain install skips onnxruntime-node's CUDA download; asking for cuda12 still gets it", () => {
  assert.equal(installFlag(plain()), false, 'skip: the bundled CPU build only');
  // What the GPU image sets wins over .npmrc: no longer skip (the script then installs the
  // platform's CUDA 12 binaries on linux/x64).
  assert.notEqual(installFlag({ ...plain(), ONNXRUNTIME_NODE_INSTALL: 'cuda12' }), false);
});
