import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test, type TestContext } from 'node:test';
import type { TaskRecord } from '@taskline/engine';
import { Cluster, deltaText, exited, LONG, outputText, type ParsedEvent } from './helpers.js';

const STEP_MS = '20';
const FINAL = ['response.completed', 'response.incomplete', 'response.failed', 'response.cancelled'];

let cluster: Cluster;
/** The uninterrupted run of LONG: what every restarted or handed-back run must reproduce. */
let reference: { text: string; outputTokens: number };

/** A worker that is SIGKILLed when the test ends, so that it never takes the next test's tasks. */
function worker(t: TestContext, id: string, env: Record<string, string> = {}): ChildProcess {
  const child = cluster.startWorker({
    TASKLINE_WORKER_ID: id,
    TASKLINE_WORKER_MIN_STEP_MS: STEP_MS,
    ...env,
  });
  t.after(async () => {
    child.kill('SIGKILL');
    await exited(child);
  });
  return child;
}

/** One final event, last; sequence numbers 1..N with no gap or duplicate. */
function assertWellFormed(events: ParsedEvent[]): ParsedEvent {
  assert.deepEqual(
    events.map((e) => e.seq),
    events.map((_, i) => i + 1),
  );
  assert.equal(events.filter((e) => FINAL.includes(e.type)).length, 1, 'exactly one final event');
  const last = events.at(-1)!;
  assert.ok(FINAL.includes(last.type), `last event is ${last.type}`);
  return last;
}

/** Worker ids of the `loading` events: who claimed each attempt, in order. */
function claimedBy(events: ParsedEvent[]): unknown[] {
  return events.filter((e) => e.task_status === 'loading').map((e) => e.worker);
}

before(async () => {
  cluster = await Cluster.start({
    env: {
      TASKLINE_LEASE_MS: '1000',
      TASKLINE_RECOVERY_INTERVAL_MS: '200',
      TASKLINE_WORKER_TIMEOUT_MS: '1000',
    },
  });
  const ref = cluster.startWorker({ TASKLINE_WORKER_ID: 'w-reference' });
  const { task } = await cluster.run(LONG);
  ref.kill('SIGKILL');
  await exited(ref);
  assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
  const usage = (task.result as { usage: { output_tokens: number } }).usage;
  reference = { text: outputText(task.result), outputTokens: usage.output_tokens };
  // The scenarios below interrupt after 20 tokens: the reference must run well past that.
  assert.ok(reference.outputTokens >= 100, `the reference run made only ${reference.outputTokens} tokens`);
});

after(() => cluster.stop());

test('cancel mid-generation: the worker stops at once and the task ends cancelled with the partial output', async (t) => {
  worker(t, 'w-cancel');
  const { id } = await cluster.create(LONG);
  await cluster.waitForTokens(id, 10);
  const { outcome } = await cluster.store.cancel(id, 't1');
  assert.equal(outcome, 'cancelling');
  // Appends are refused once the task is cancelling: these are the tokens sent before the cancel.
  const sent = (await cluster.store.snapshot(id)).length;
  const task = await cluster.waitForEnd(id);
  assert.equal(task.status, 'cancelled', JSON.stringify(task.error));
  const events = await cluster.events(id);
  const last = assertWellFormed(events);
  assert.equal(last.type, 'response.cancelled');
  assert.deepEqual(last.response, task.result);
  const response = task.result as { status: string; usage: { output_tokens: number } };
  assert.equal(response.status, 'cancelled');
  const text = outputText(task.result);
  const streamed = deltaText(events);
  assert.ok(streamed.length > 0, 'no delta before the cancel');
  // Text made after the cancel (a refused append, or held back for the next tick) ends the stream
  // with the cancel: the deltas add up to the cancelled response's text.
  assert.equal(streamed, text);
  // Nothing after the `cancelling` event says the task is running again.
  const statuses = events.map((e) => e.task_status);
  const since = statuses.slice(statuses.indexOf('cancelling'));
  assert.ok(since.length > 1, 'no cancelling event');
  assert.deepEqual(new Set(since), new Set(['cancelling', 'cancelled']), since.join(','));
  assert.ok(reference.text.startsWith(text), 'the partial output is not a prefix of the full one');
  // The cancel reaches the worker through its next (refused) append or the event hub, i.e. within
  // a step or two; 10 steps of margin keep this about behaviour, not timing.
  const extra = response.usage.output_tokens - sent;
  assert.ok(extra >= 0 && extra <= 10, `${extra} tokens were generated after the cancel`);
  assert.ok(response.usage.output_tokens < reference.outputTokens);
  // The slot was released: the same worker runs the next task.
  const next = await cluster.run({ input: 'Hello.', seed: 1, max_output_tokens: 4 });
  assert.equal(next.task.status, 'succeeded');
});

test('cancel while text waits for the next flush: it ends the stream with the cancel, marked cancelling', async (t) => {
  // A tick far away: after the first delta (sent at once) the model's text is held back.
  worker(t, 'w-cancel-held', { TASKLINE_STREAM_FLUSH_MS: '1000' });
  const { id } = await cluster.create(LONG);
  await cluster.waitForTokens(id, 1);
  await sleep(200); // about ten steps of STEP_MS, all held back
  await cluster.store.cancel(id, 't1');
  const task = await cluster.waitForEnd(id);
  assert.equal(task.status, 'cancelled', JSON.stringify(task.error));
  const events = await cluster.events(id);
  assertWellFormed(events);
  const statuses = events.map((e) => e.task_status);
  const cancelling = statuses.indexOf('cancelling');
  const carried = events.slice(cancelling).filter((e) => e.type === 'response.output_text.delta');
  assert.ok(carried.length > 0, 'no held-back text went with the cancelled end');
  assert.equal(deltaText(events), outputText(task.result));
  assert.deepEqual(new Set(statuses.slice(cancelling)), new Set(['cancelling', 'cancelled']));
});

/** Starts a generation under `policy`, SIGKILLs its worker after 20 tokens, then starts another. */
async function killMidGeneration(t: TestContext, policy: TaskRecord['onRestart']) {
  const first = worker(t, `w-${policy}-1`);
  const { id } = await cluster.create(LONG, { onRestart: policy });
  await cluster.waitForTokens(id, 20);
  first.kill('SIGKILL');
  await exited(first);
  const sent = (await cluster.store.snapshot(id)).length;
  if (policy !== 'fail') worker(t, `w-${policy}-2`);
  const task = await cluster.waitForEnd(id);
  const events = await cluster.events(id);
  return { task, events, sent, last: assertWellFormed(events) };
}

test('SIGKILL under on_restart=fail: the task fails with server_restarted', async (t) => {
  const { task, events, last } = await killMidGeneration(t, 'fail');
  assert.equal(task.status, 'failed');
  assert.equal(task.error?.code, 'server_restarted');
  assert.equal(task.attempt, 1);
  assert.equal(last.type, 'response.failed');
  assert.equal((last.error as { code: string }).code, 'server_restarted');
  assert.deepEqual(claimedBy(events), ['w-fail-1']);
});

test('SIGKILL under on_restart=retry: a second attempt starts over and completes', async (t) => {
  const { task, events, last } = await killMidGeneration(t, 'retry');
  assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
  assert.equal(task.attempt, 2);
  assert.equal(last.type, 'response.completed');
  assert.deepEqual(claimedBy(events), ['w-retry-1', 'w-retry-2']);
  const requeued = events.find((e) => e.task_status === 'queued' && e.reason === 'worker_lost');
  assert.equal(requeued?.on_restart, 'retry');
  // A retry starts from scratch (same seed, so the same text); the client sees the item announced twice.
  assert.equal(outputText(task.result), reference.text);
  assert.equal(events.filter((e) => e.type === 'response.output_item.added').length, 2);
});

test('SIGKILL under on_restart=resume: the run continues exactly where it stopped', async (t) => {
  const { task, events, sent, last } = await killMidGeneration(t, 'resume');
  assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
  assert.equal(task.attempt, 2);
  assert.equal(last.type, 'response.completed');
  assert.deepEqual(claimedBy(events), ['w-resume-1', 'w-resume-2']);
  const requeued = events.find((e) => e.task_status === 'queued' && e.reason === 'worker_lost');
  assert.equal(requeued?.on_restart, 'resume');
  assert.ok(sent >= 20);
  assert.equal(requeued?.resumed_from_tokens, sent);
  // Exact resume: the same text as the uninterrupted run, and the deltas the client got, across
  // both attempts, rebuild it with nothing repeated or missing.
  assert.equal(outputText(task.result), reference.text);
  assert.equal(deltaText(events), reference.text);
  assert.equal(events.filter((e) => e.type === 'response.output_item.added').length, 1);
  const usage = (task.result as { usage: { output_tokens: number } }).usage;
  assert.equal(usage.output_tokens, reference.outputTokens);
});

test('SIGTERM drain within the deadline: the running task finishes there and the worker exits', async (t) => {
  const draining = worker(t, 'w-drain-finish');
  const { id } = await cluster.create(LONG);
  await cluster.waitForTokens(id, 20);
  draining.kill('SIGTERM');
  assert.equal(await exited(draining), 0);
  const task = await cluster.waitForEnd(id);
  assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
  assert.equal(task.attempt, 1);
  const events = await cluster.events(id);
  assertWellFormed(events);
  assert.deepEqual(claimedBy(events), ['w-drain-finish']);
  assert.equal(outputText(task.result), reference.text);
});

test('SIGTERM drain past the deadline: the task is handed back, another worker completes it, nothing lost', async (t) => {
  const draining = worker(t, 'w-drain-1', { TASKLINE_DRAIN_DEADLINE_MS: '200' });
  // on_restart=fail: a hand-back is no restart, the task must not fail.
  const { id } = await cluster.create(LONG, { onRestart: 'fail' });
  await cluster.waitForTokens(id, 20);
  worker(t, 'w-drain-2');
  draining.kill('SIGTERM');
  assert.equal(await exited(draining), 0);
  const task = await cluster.waitForEnd(id);
  assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
  assert.equal(task.attempt, 2);
  const events = await cluster.events(id);
  assert.equal(assertWellFormed(events).type, 'response.completed');
  assert.deepEqual(claimedBy(events), ['w-drain-1', 'w-drain-2']);
  assert.ok(events.some((e) => e.task_status === 'queued' && e.reason === 'worker_draining'));
  // The second worker continued from the first one's tokens: same text, no delta repeated or lost.
  assert.equal(outputText(task.result), reference.text);
  assert.equal(deltaText(events), reference.text);
});
