/**
 * The model thread dies (an exception inside it) while a task generates: that task fails with
 * internal_error, and the same worker process loads the model anew for the next task.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Cluster, LONG, outputText } from './helpers.js';

let cluster: Cluster;

before(async () => {
  cluster = await Cluster.start({
    entries: { 'gpu-worker': 'services/gpu-worker/test/thread-crash-entry.ts' },
  });
});
after(() => cluster.stop());

test('a task whose model thread dies fails with internal_error, and the worker runs the next one', async () => {
  const worker = cluster.startWorker({ TASKLINE_WORKER_MIN_STEP_MS: '20' });
  const { id } = await cluster.create(LONG, { onRestart: 'fail' });
  await cluster.waitForTokens(id, 3);
  worker.kill('SIGUSR2');
  const failed = await cluster.waitForEnd(id);
  assert.equal(failed.status, 'failed');
  const error = failed.error as { code: string; status: number; detail: string };
  assert.equal(error.code, 'internal_error', JSON.stringify(error));
  assert.match(error.detail, /model thread of tiny-chat died/);

  const { task } = await cluster.run({ input: 'Hello!', max_output_tokens: 16 });
  assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
  assert.equal(outputText(task.result), 'Hello! How can I help you today?');
  assert.equal(worker.exitCode, null, 'the worker process is still running');
});
