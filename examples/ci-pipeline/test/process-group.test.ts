// One step as a process group, without the pipeline: what a step leaves behind dies with it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runStep } from '../src/process-group.js';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
};

test('a step that exits leaving a background process: the process dies with the step', async () => {
  const workspace = mkdtempSync(join(tmpdir(), 'ci-step-'));
  try {
    const lines: string[] = [];
    const started = Date.now();
    // The background sleep holds the step's stdout open: without the group kill, 'close' would wait for it.
    const outcome = await runStep(
      { name: 'leaky', command: 'sh', args: ['-c', 'sleep 60 & echo "bg $!"'], cwd: '.' },
      workspace,
      { signal: new AbortController().signal, killGraceMs: 500, onLine: (l) => lines.push(l) },
    );
    assert.equal(outcome.code, 0);
    assert.ok(Date.now() - started < 30_000, 'the step ended with its leader');
    const pid = Number(/^bg (\d+)$/.exec(lines[0] ?? '')?.[1]);
    assert.ok(pid > 0, lines.join('\n'));
    for (let i = 0; i < 40 && alive(pid); i++) await new Promise((r) => setTimeout(r, 50));
    assert.equal(alive(pid), false, `background pid ${pid} outlived its step`);
  } finally {
    rmSync(workspace, { recursive: true, force: true });
  }
});
