import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test, type TestContext } from 'node:test';
import { RESTART_EVENT_TYPE, visibleStepViolation, type TaskRecord, type TaskStatus } from '@taskline/engine';
import { bounded, freePort } from '@taskline/testing';
import {
  EngineStack,
  deltaText,
  exited,
  LONG,
  outputText,
  until,
  type ParsedEvent,
} from '@taskline/test-support/engine-stack';

const STEP_MS = '20';
const FINAL = ['response.completed', 'response.incomplete', 'response.failed', 'response.cancelled'];

let cluster: EngineStack;
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

/** The statuses the events show follow LMSP 1.0 section 7.2's table: never a step back. */
function assertVisible(events: ParsedEvent[]): void {
  const statuses = events.map((e) => e.task_status as TaskStatus).filter(Boolean);
  assert.equal(visibleStepViolation(statuses), null, statuses.join(' '));
}

/** The deltas after the last restart event: what a reader honouring it assembles. */
function textAfterRestarts(events: ParsedEvent[]): string {
  const last = events.findLastIndex((e) => e.type === RESTART_EVENT_TYPE);
  return deltaText(events.slice(last + 1));
}

/** Worker ids of the `loading` events: who claimed each attempt clients saw start, in order. */
function claimedBy(events: ParsedEvent[]): unknown[] {
  return events.filter((e) => e.task_status === 'loading').map((e) => e.worker);
}

before(async () => {
  cluster = await EngineStack.start({
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
  assert.ok(
    response.usage.output_tokens < reference.outputTokens,
    'response.usage.output_tokens < reference.outputTokens',
  );
  // The slot was released: the same worker runs the next task.
  const next = await cluster.run({ input: 'Hello.', seed: 1, max_output_tokens: 4 });
  assert.equal(next.task.status, 'succeeded');
});

test('cancel while text waits for the next flush: it ends the stream with the cancel, marked cancelling', async (t) => {
  // A tick far away: after the first delta (sent at once) the model's text is held back.
  const metricsPort = await freePort();
  worker(t, 'w-cancel-held', {
    TASKLINE_STREAM_FLUSH_MS: '1000',
    TASKLINE_METRICS_PORT: String(metricsPort),
  });
  const { id } = await cluster.create(LONG);
  await until('the worker to hold back 5 tokens', async () => {
    // Made first, stored second: stored only grows, so the difference never overstates what is held.
    const made = await outputTokensCounted(metricsPort);
    const stored = (await cluster.store.snapshot(id)).length;
    return stored > 0 && made - stored >= 5 ? true : undefined;
  });
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

/** The worker's `taskline_task_output_tokens_total` (every series): tokens its models made so far. */
async function outputTokensCounted(port: number): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`).catch(() => undefined);
  if (!res?.ok) return 0; // not listening yet
  return (await res.text())
    .split('\n')
    .filter((line) => line.startsWith('taskline_task_output_tokens_total{'))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
}

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
  assertVisible(events);
});

test('SIGKILL under on_restart=retry: a second attempt starts over and completes', async (t) => {
  const { task, events, last } = await killMidGeneration(t, 'retry');
  assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
  assert.equal(task.attempt, 2);
  assert.equal(last.type, 'response.completed');
  // The second attempt's claim is internal: clients saw the task running all along.
  assert.deepEqual(claimedBy(events), ['w-retry-1']);
  assertVisible(events);
  const restarts = events.filter((e) => e.type === RESTART_EVENT_TYPE);
  assert.equal(restarts.length, 1);
  assert.equal(restarts[0]!.reason, 'worker_lost');
  assert.equal(restarts[0]!.task_status, 'running');
  // A retry starts from scratch (same seed, so the same text): the deltas after the restart event
  // alone are the final text; those before it were the lost attempt's.
  assert.equal(outputText(task.result), reference.text);
  assert.equal(textAfterRestarts(events), reference.text);
  assert.notEqual(deltaText(events), reference.text);
  assert.equal(events.filter((e) => e.type === 'response.output_item.added').length, 2);
});

test('SIGKILL under on_restart=resume: the run continues exactly where it stopped', async (t) => {
  const { task, events, sent, last } = await killMidGeneration(t, 'resume');
  assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
  assert.equal(task.attempt, 2);
  assert.equal(last.type, 'response.completed');
  assert.deepEqual(claimedBy(events), ['w-resume-1']);
  assertVisible(events);
  const requeued = events.find((e) => e.task_status === 'running' && e.reason === 'worker_lost');
  assert.equal(requeued?.on_restart, 'resume');
  assert.ok(
    !events.some((e) => e.type === RESTART_EVENT_TYPE),
    '!events.some((e) => e.type === RESTART_EVENT_TYPE)',
  );
  assert.ok(sent >= 20, 'sent >= 20');
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

/** Every status `store.get` shows for `ids` until `stop()`: what a polling client reads. */
function pollStatuses(ids: string[]) {
  const seen = new Map<string, TaskStatus[]>(ids.map((id) => [id, []]));
  let running = true;
  const loop = (async () => {
    while (running) {
      for (const id of ids) {
        const task = await cluster.store.get(id);
        const list = seen.get(id)!;
        if (task && list.at(-1) !== task.shownStatus) list.push(task.shownStatus);
      }
      await sleep(5);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return seen;
    },
  };
}

test('SIGTERM drain past the deadline: each unfinished task gets its own on_restart policy (LMSP 7.5)', async (t) => {
  const draining = worker(t, 'w-drain-1', { TASKLINE_DRAIN_DEADLINE_MS: '200', TASKLINE_WORKER_SLOTS: '3' });
  const ids: Record<string, string> = {};
  for (const policy of ['fail', 'retry', 'resume'] as const)
    ids[policy] = (await cluster.create(LONG, { onRestart: policy })).id;
  const polled = pollStatuses(Object.values(ids));
  for (const id of Object.values(ids)) await cluster.waitForTokens(id, 20);
  worker(t, 'w-drain-2', { TASKLINE_WORKER_SLOTS: '3' });
  draining.kill('SIGTERM');
  assert.equal(await exited(draining), 0);
  const ended: Record<string, { task: TaskRecord; events: ParsedEvent[] }> = {};
  for (const [policy, id] of Object.entries(ids)) {
    const task = await cluster.waitForEnd(id);
    const events = await cluster.events(id);
    assertWellFormed(events);
    assertVisible(events);
    ended[policy] = { task, events };
  }
  for (const [id, statuses] of await polled.stop())
    assert.equal(visibleStepViolation(statuses, true), null, `${id}: ${statuses.join(' ')}`);

  // fail: failed with server_restarted, never run again.
  const fail = ended.fail!;
  assert.equal(fail.task.status, 'failed');
  assert.equal(fail.task.error?.code, 'server_restarted');
  assert.equal(fail.task.attempt, 1);
  assert.equal(fail.events.at(-1)!.type, 'response.failed');

  // retry: from the start, announced by one restart event; the deltas after it are the final text.
  const retry = ended.retry!;
  assert.equal(retry.task.status, 'succeeded', JSON.stringify(retry.task.error));
  assert.equal(retry.task.attempt, 2);
  const restarts = retry.events.filter((e) => e.type === RESTART_EVENT_TYPE);
  assert.deepEqual(
    restarts.map((e) => [e.reason, e.task_status]),
    [['worker_draining', 'running']],
  );
  assert.equal(outputText(retry.task.result), reference.text);
  assert.equal(textAfterRestarts(retry.events), reference.text);

  // resume: continued from the snapshot; every delta, across both attempts, makes the text once.
  const resume = ended.resume!;
  assert.equal(resume.task.status, 'succeeded', JSON.stringify(resume.task.error));
  assert.equal(resume.task.attempt, 2);
  const resumed = resume.events.find((e) => e.reason === 'worker_draining');
  assert.equal(resumed?.task_status, 'running');
  assert.ok((resumed?.resumed_from_tokens as number) >= 20, '(resumed?.resumed_from_tokens as number) >= 20');
  assert.equal(outputText(resume.task.result), reference.text);
  assert.equal(deltaText(resume.events), reference.text);
});

test('SIGTERM drain while Redis stalls: the worker still exits, and its task ends after Redis is back', async (t) => {
  const draining = worker(t, 'w-drain-stalled', { TASKLINE_DRAIN_DEADLINE_MS: '200' });
  const { id } = await cluster.create(LONG, { onRestart: 'retry' });
  await cluster.waitForTokens(id, 20);
  // Every write of the drain (the attempt's end, BullMQ's job) waits on a Redis that answers nothing.
  cluster.redis.pause();
  try {
    draining.kill('SIGTERM');
    assert.equal(await bounded('the drain of a worker whose Redis stalls', 30_000, exited(draining)), 0);
  } finally {
    cluster.redis.resume();
  }
  worker(t, 'w-drain-stalled-next');
  const task = await cluster.waitForEnd(id);
  assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
  assertWellFormed(await cluster.events(id));
});

test('tasks still queued when every service restarts run afterwards, even under fail (not interrupted)', async (t) => {
  // One slot, taken by a long fail task: the second fail task waits in the queue.
  const first = worker(t, 'w-queued-1', { TASKLINE_WORKER_SLOTS: '1' });
  const running = await cluster.create(LONG, { onRestart: 'fail' });
  await cluster.waitForTokens(running.id, 5);
  const waiting = await cluster.create(
    { input: 'Hello.', seed: 1, max_output_tokens: 8 },
    { onRestart: 'fail' },
  );
  assert.equal((await cluster.store.get(waiting.id))!.status, 'queued');
  // Every service goes down at once (the worker and the scheduler) and comes back.
  first.kill('SIGKILL');
  await exited(first);
  for (const [port, scheduler] of [...cluster.schedulers]) {
    scheduler.kill('SIGKILL');
    await exited(scheduler);
    cluster.restartScheduler(port);
  }
  worker(t, 'w-queued-2');
  const interrupted = await cluster.waitForEnd(running.id);
  assert.equal(interrupted.status, 'failed');
  assert.equal(interrupted.error?.code, 'server_restarted');
  const queued = await cluster.waitForEnd(waiting.id);
  assert.equal(queued.status, 'succeeded', JSON.stringify(queued.error));
  assert.equal(queued.attempt, 1);
  assertVisible(await cluster.events(waiting.id));
});
