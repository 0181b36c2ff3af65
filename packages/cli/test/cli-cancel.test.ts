/**
 * `taskline tasks cancel` against a running stack: each test has a second CLI process start and
 * cancel a task while a first follows it, so it runs alone (scripts/test-tiers.sh), where a start
 * cannot be starved past the task's ~10 s.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { EXIT } from '../src/index.js';
import { until } from '@taskline/test-support/client-stack';
import { longArgs, useCliStack } from './spawn.js';

const { ctx, cli, finished } = useCliStack();

describe('taskline tasks cancel against a running stack', () => {
  test('cancel says "cancellation requested" (exit 8) until the task stops; watch then exits 3', async () => {
    // A long lease: the worker held with SIGSTOP below keeps its task while a CLI starts, rather
    // than losing it to recovery (a worker of its own: the crash tests above need short leases).
    await ctx.stack.replaceWorker({ TASKLINE_LEASE_MS: '60000' });
    const run = cli(longArgs);
    await until('the task to run', () => (run.stdout.length > 5 ? true : undefined));
    const id = /task (task_\S+)/.exec(run.stderr)![1]!;
    // The worker is held (SIGSTOP) so it cannot acknowledge the cancel: the task stays `cancelling`.
    ctx.stack.worker.kill('SIGSTOP');
    let cancel;
    try {
      cancel = await finished(['tasks', 'cancel', id]);
    } finally {
      ctx.stack.worker.kill('SIGCONT');
    }
    assert.equal(cancel.code, EXIT.cancelRequested, `cancel exit ${cancel.code}: ${cancel.stderr}`);
    assert.match(cancel.stdout, /cancellation requested/);
    assert.equal(await run.done, EXIT.taskCancelled);
    const watch = await finished(['tasks', 'watch', id]);
    assert.equal(watch.code, EXIT.taskCancelled);
    const waited = await finished(['tasks', 'cancel', '--wait', id]);
    assert.equal(waited.code, EXIT.ok, 'cancelling a cancelled task confirms it');
  });

  test('cancel --wait exits 0 once the cancel it asked for has stopped the task', async () => {
    const run = cli(longArgs);
    await until('the task to run', () => (run.stdout.length > 5 ? true : undefined));
    const id = /task (task_\S+)/.exec(run.stderr)![1]!;
    const cancel = await finished(['tasks', 'cancel', '--wait', id]);
    assert.equal(cancel.code, EXIT.ok, `cancel --wait exit ${cancel.code}: ${cancel.stderr}`);
    assert.equal(await run.done, EXIT.taskCancelled, 'the run that followed it says cancelled');
  });
});
