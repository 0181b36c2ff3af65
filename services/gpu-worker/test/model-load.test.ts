/**
 * A worker that cannot load a model: the failure is the worker's, not the task's. The task gets
 * its on_restart policy as after a lost worker, and the worker stops taking that model's jobs.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { EngineStack, exited } from '@taskline/test-support/engine-stack';

let cluster: EngineStack;
before(async () => (cluster = await EngineStack.start()));
after(() => cluster.stop());

test('a worker whose model does not load fails none of the tasks it claims, and leaves them to a worker that can', async () => {
  const broken = cluster.startWorker({
    TASKLINE_MODELS_DIR: '/nonexistent/models',
    TASKLINE_WORKER_FETCHERS: '2',
  });
  const healthy = cluster.startWorker();
  const ids: string[] = [];
  for (let i = 0; i < 20; i++)
    ids.push(
      (await cluster.create({ input: `Hello ${i}`, max_output_tokens: 4 }, { onRestart: 'retry' })).id,
    );
  const ended = await Promise.all(ids.map((id) => cluster.waitForEnd(id, 120_000)));
  const failed = ended
    .filter((t) => t.status !== 'succeeded')
    .map((t) => `${t.id}: ${t.status} ${t.error?.code}`);
  assert.deepEqual(failed, [], 'every task succeeded');
  // Out of that model's dispatch: one more task goes to the healthy worker, never interrupted.
  const { task } = await cluster.run({ input: 'Hello!', max_output_tokens: 4 }, { onRestart: 'fail' });
  assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
  assert.equal(broken.exitCode, null, 'the broken worker keeps running');
  for (const w of [broken, healthy]) {
    w.kill('SIGKILL');
    await exited(w);
  }
});
