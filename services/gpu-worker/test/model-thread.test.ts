/**
 * The model thread dies (an exception inside it) while tasks generate: each gets its own
 * `on_restart` policy (LMSP 1.0 section 7.5), as when the whole worker is lost, and the same worker
 * process loads the model anew for the next attempt and the next task.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { RESTART_EVENT_TYPE } from '@taskline/engine';
import { EngineStack, deltaText, exited, LONG, outputText } from '@taskline/test-support/engine-stack';

let cluster: EngineStack;
/**
 * Its workers are never stopped mid-task (a dead model thread's tasks are restarted by the worker
 * at once): a 10 s lease, which a starved host does not let lapse mid-run, so each attempt counted
 * below is one the thread's death made, not a lapse's.
 */
const LONG_LEASE = { TASKLINE_LEASE_MS: '10000' };

before(async () => {
  cluster = await EngineStack.start({
    entries: { 'gpu-worker': 'services/gpu-worker/test/thread-crash-entry.ts' },
  });
});
after(() => cluster.stop());

test('tasks whose model thread dies get their on_restart policy, and the worker runs them and the next one', async () => {
  const worker = cluster.startWorker({
    TASKLINE_WORKER_MIN_STEP_MS: '20',
    TASKLINE_WORKER_SLOTS: '3',
    ...LONG_LEASE,
  });
  const ids: Record<string, string> = {};
  for (const policy of ['fail', 'retry', 'resume'] as const)
    ids[policy] = (await cluster.create(LONG, { onRestart: policy })).id;
  for (const id of Object.values(ids)) await cluster.waitForTokens(id, 3);
  worker.kill('SIGUSR2');

  // fail: failed with server_restarted, as after a lost worker; never run again.
  const failed = await cluster.waitForEnd(ids.fail!);
  assert.equal(failed.status, 'failed');
  assert.equal(failed.error?.code, 'server_restarted', JSON.stringify(failed.error));
  assert.equal(failed.attempt, 1);
  assert.equal((await cluster.events(ids.fail!)).at(-1)!.type, 'response.failed');

  // retry: a new attempt from the start, announced by one restart event, that finishes.
  const retried = await cluster.waitForEnd(ids.retry!);
  assert.equal(retried.status, 'succeeded', JSON.stringify(retried.error));
  assert.equal(retried.attempt, 2);
  const events = await cluster.events(ids.retry!);
  const restarts = events.filter((e) => e.type === RESTART_EVENT_TYPE);
  assert.deepEqual(
    restarts.map((e) => [e.reason, e.task_status]),
    [['worker_lost', 'running']],
  );
  const text = outputText(retried.result);
  assert.equal(deltaText(events.slice(events.indexOf(restarts[0]!))), text);

  // resume: continued after the tokens the first attempt stored; its deltas make the text once.
  const resumed = await cluster.waitForEnd(ids.resume!);
  assert.equal(resumed.status, 'succeeded', JSON.stringify(resumed.error));
  assert.equal(resumed.attempt, 2);
  assert.equal(outputText(resumed.result), text, 'the same seeded generation, interrupted or not');
  assert.equal(deltaText(await cluster.events(ids.resume!)), text);

  const { task } = await cluster.run({ input: 'Hello!', max_output_tokens: 16 });
  assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
  assert.equal(outputText(task.result), 'Hello! How can I help you today?');
  assert.equal(worker.exitCode, null, 'the worker process is still running');
  worker.kill('SIGKILL');
  await exited(worker);
});

test('a task whose every attempt kills its model thread ends server_restarted at TASKLINE_MAX_ATTEMPTS', async () => {
  const worker = cluster.startWorker({
    TASKLINE_WORKER_MIN_STEP_MS: '20',
    TASKLINE_MAX_ATTEMPTS: '2',
    ...LONG_LEASE,
  });
  const { id } = await cluster.create(LONG, { onRestart: 'retry' });
  for (const attempt of [1, 2]) {
    await cluster.waitFor(id, `attempt ${attempt}`, (t) => t.attempt === attempt);
    // A retry drops the tokens of the attempt before: these are this attempt's.
    await cluster.waitForTokens(id, 3);
    worker.kill('SIGUSR2');
  }
  const ended = await cluster.waitForEnd(id);
  assert.equal(ended.status, 'failed');
  assert.equal(ended.error?.code, 'server_restarted', JSON.stringify(ended.error));
  assert.match(ended.error!.detail, /\binterrupted 2 times\b/);
  assert.equal(ended.attempt, 2);
  const events = await cluster.events(id);
  assert.equal(events.filter((e) => e.type === RESTART_EVENT_TYPE).length, 1);
  assert.equal(events.at(-1)!.type, 'response.failed');
  assert.equal(worker.exitCode, null, 'the worker process is still running');
});
