/**
 * LMSP 1.0 section 7.5 on every interruption (a lapsed lease or a drain deadline), and the status
 * clients see (section 7.2) never stepping back while a new attempt is queued and claimed.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  emptyResponse,
  RESTART_EVENT_TYPE,
  storeOptionsFromEnv,
  TaskStore,
  visibleStepViolation,
  type OnRestart,
  type TaskRecord,
  type TaskStatus,
} from '../src/index.js';
import { harness, newTask, type Harness } from './helpers.js';

let h: Harness;
before(async () => (h = await harness()));
after(() => h.close());

type Parsed = { seq: number; type: string; task_status?: TaskStatus } & Record<string, unknown>;

async function events(id: string): Promise<Parsed[]> {
  const { events } = await h.store.events(id, 0);
  return events.map((e) => ({ seq: e.seq, type: e.type, ...(JSON.parse(e.data) as object) }));
}

/** The statuses the task's events show, in order. */
async function shown(id: string): Promise<TaskStatus[]> {
  return (await events(id)).map((e) => e.task_status!).filter(Boolean);
}

/** A task claimed and running on a worker, with `tokens` output tokens streamed. */
async function running(onRestart: OnRestart, leaseMs = 60_000) {
  const task = await h.store.create(newTask({ onRestart }));
  await h.store.claim(task.id, 'w1', leaseMs);
  await h.store.start(task.id, 1);
  await h.store.append(
    task.id,
    1,
    [5, 6],
    [{ type: 'response.output_text.delta', data: { task_status: 'running', delta: 'ab' } }],
  );
  return task;
}

const lapse = () => new Promise((r) => setTimeout(r, 5));

/** What a restart that failed an untraced task reports, but its policy. */
const failed = (id: string) => ({
  id,
  kind: 'response',
  status: 'failed',
  traces: { task: null, attempt: null },
});

test('restart at a drain deadline under fail: failed with server_restarted, as after a crash', async () => {
  const task = await running('fail');
  const done = await h.store.restart(task.id, 1);
  assert.deepEqual(done, { ...failed(task.id), policy: 'fail' });
  const after = (await h.store.get(task.id))!;
  assert.equal(after.status, 'failed');
  assert.equal(after.error?.code, 'server_restarted');
  const last = (await events(task.id)).at(-1)!;
  assert.equal(last.type, 'response.failed');
  assert.equal(visibleStepViolation(await shown(task.id)), null);
});

test('restart under retry: one restart event, the snapshot dropped, the task still shown running', async () => {
  const task = await running('retry');
  assert.equal((await h.store.restart(task.id, 1))?.status, 'queued');
  const queued = (await h.store.get(task.id))!;
  assert.equal(queued.status, 'queued', 'internally a new attempt waits');
  assert.equal(queued.shownStatus, 'running', 'clients still see it running');
  assert.deepEqual(await h.store.snapshot(task.id), []);
  const restart = (await events(task.id)).at(-1)!;
  assert.equal(restart.type, RESTART_EVENT_TYPE);
  assert.equal(restart.task_status, 'running');
  assert.equal(restart.reason, 'worker_draining');
  assert.equal((restart.response as { status: string; output: unknown[] }).status, 'in_progress');
  // The new attempt's claim and start write nothing: to the client it never stopped running.
  const seq = (await events(task.id)).length;
  const claimed = await h.store.claim(task.id, 'w2', 60_000);
  assert.equal(claimed.status, 'loading');
  assert.equal(claimed.shownStatus, 'running');
  await h.store.start(task.id, 2, claimed.shownStatus);
  assert.equal((await events(task.id)).length, seq);
  await h.store.finish(task.id, 2, { status: 'succeeded', result: null });
  assert.equal(visibleStepViolation(await shown(task.id)), null);
  assert.equal((await events(task.id)).filter((e) => e.type === RESTART_EVENT_TYPE).length, 1);
});

test('restart under resume: continues after the snapshot, shown running, no restart event', async () => {
  const task = await running('resume');
  assert.equal((await h.store.restart(task.id, 1))?.status, 'queued');
  assert.deepEqual(await h.store.snapshot(task.id), [5, 6]);
  const last = (await events(task.id)).at(-1)!;
  assert.equal(last.type, 'response.in_progress');
  assert.equal(last.task_status, 'running');
  assert.equal(last.resumed_from_tokens, 2);
  assert.equal((await h.store.get(task.id))!.shownStatus, 'running');
  // A claim that starts at once (model loaded) writes nothing either.
  await h.store.claim(task.id, 'w2', 60_000, { start: true });
  await h.store.finish(task.id, 2, { status: 'succeeded', result: null });
  const statuses = await shown(task.id);
  assert.equal(visibleStepViolation(statuses), null, statuses.join(' '));
  assert.ok(
    !(await events(task.id)).some((e) => e.type === RESTART_EVENT_TYPE),
    '!(await events(task.id)).some((e) => e.type === RESTART_EVENT_TYPE)',
  );
});

test('a lapsed lease restarts the same way (worker_lost), twice in a row, never stepping back', async () => {
  const task = await running('retry', 1);
  await lapse();
  assert.equal(await h.store.recover(task.id), 'queued');
  await h.store.claim(task.id, 'w2', 1);
  await lapse();
  // Lost again while loading: still shown running, a second restart event.
  assert.equal(await h.store.recover(task.id), 'queued');
  assert.equal((await h.store.get(task.id))!.shownStatus, 'running');
  const restarts = (await events(task.id)).filter((e) => e.type === RESTART_EVENT_TYPE);
  assert.deepEqual(
    restarts.map((e) => e.reason),
    ['worker_lost', 'worker_lost'],
  );
  await h.store.claim(task.id, 'w3', 60_000);
  await h.store.start(task.id, 3, 'running');
  await h.store.finish(task.id, 3, { status: 'succeeded', result: null });
  assert.equal(visibleStepViolation(await shown(task.id)), null);
});

test('a task lost while loading stays shown loading, then goes on to running', async () => {
  const task = await h.store.create(newTask({ onRestart: 'retry' }));
  await h.store.claim(task.id, 'w1', 1);
  await lapse();
  assert.equal(await h.store.recover(task.id), 'queued');
  assert.equal((await h.store.get(task.id))!.shownStatus, 'loading');
  await h.store.claim(task.id, 'w2', 60_000, { start: true });
  const statuses = await shown(task.id);
  assert.deepEqual(statuses, ['queued', 'loading', 'loading', 'loading', 'running']);
  assert.equal(visibleStepViolation(statuses), null);
});

test('cancelling a new attempt still queued goes through cancelling, as 7.2 requires of a running task', async () => {
  const task = await running('retry');
  await h.store.restart(task.id, 1);
  const { outcome, task: after } = await h.store.cancel(task.id, 'tenant-a');
  assert.equal(outcome, 'cancelled');
  assert.equal(after.status, 'cancelled');
  const statuses = await shown(task.id);
  assert.deepEqual(statuses.slice(-3), ['running', 'cancelling', 'cancelled']);
  assert.equal(visibleStepViolation(statuses), null);
});

test('a drain restart of a task cancelled meanwhile ends it cancelled; a stale attempt restarts nothing', async () => {
  const task = await running('retry');
  await h.store.cancel(task.id, 'tenant-a');
  assert.equal((await h.store.restart(task.id, 1))?.status, 'cancelled');
  const other = await running('retry');
  assert.equal(await h.store.restart(other.id, 7), null);
  assert.equal((await h.store.get(other.id))!.status, 'running');
});

/** A store on the harness's Redis whose restarts stop at `max` attempts (TASKLINE_MAX_ATTEMPTS). */
const capped = (max: number) =>
  new TaskStore(
    h.redis,
    storeOptionsFromEnv({
      TASKLINE_TASK_RETENTION_S: 60,
      TASKLINE_EVENT_RETENTION_S: 60,
      TASKLINE_IDEMPOTENCY_TTL_S: 86_400,
      TASKLINE_IDEMPOTENCY_PENDING_MS: 30_000,
      TASKLINE_INPUT_TIMEOUT_S: 86_400,
      TASKLINE_MAX_ATTEMPTS: max,
    }),
  );

/** Ended as the `fail` policy ends a task (`server_restarted`), its detail naming the interruptions. */
async function assertRetryLimit(id: string, interruptions: number) {
  const ended = (await h.store.get(id))!;
  assert.equal(ended.status, 'failed');
  assert.equal(ended.error?.code, 'server_restarted');
  assert.match(ended.error!.detail, new RegExp(`\\binterrupted ${interruptions} times\\b`));
  assert.deepEqual(ended.result, { ...emptyResponse(ended, 'failed'), error: ended.error });
  const { type, seq: _, ...last } = (await events(id)).at(-1)!;
  assert.equal(type, 'response.failed');
  assert.deepEqual(last, { task_status: 'failed', response: ended.result, error: ended.error });
  assert.equal(visibleStepViolation(await shown(id)), null);
  return ended;
}

test('a poison task: the recovery sweep gives it no attempt past TASKLINE_MAX_ATTEMPTS, it fails server_restarted', async () => {
  const store = capped(3);
  const task = await store.create(newTask({ onRestart: 'retry' }));
  const swept: TaskRecord['status'][] = [];
  for (let attempt = 1; attempt <= 3; attempt++) {
    await store.claim(task.id, `w${attempt}`, 1, { start: true });
    await lapse();
    const mine = (await store.sweepLeases()).filter((r) => r.id === task.id);
    assert.equal(mine.length, 1);
    assert.equal(mine[0]!.policy, 'retry');
    swept.push(mine[0]!.status);
  }
  assert.deepEqual(swept, ['queued', 'queued', 'failed']);
  const ended = await assertRetryLimit(task.id, 3);
  assert.equal(ended.attempt, 3);
  await assert.rejects(store.claim(task.id, 'w4', 60_000), /task_terminal|failed/);
});

test('a drain restart of a resume task at TASKLINE_MAX_ATTEMPTS fails it too; below the cap it resumes', async () => {
  const store = capped(2);
  const task = await running('resume');
  assert.equal((await store.restart(task.id, 1))?.status, 'queued');
  await store.claim(task.id, 'w2', 60_000, { start: true });
  const done = await store.restart(task.id, 2);
  assert.deepEqual(done, { ...failed(task.id), policy: 'resume' });
  await assertRetryLimit(task.id, 2);
});

test('past the cap a task being cancelled still ends cancelled, and fail still fails server_restarted', async () => {
  const store = capped(1);
  const cancelling = await running('retry');
  await store.cancel(cancelling.id, 'tenant-a');
  assert.equal((await store.restart(cancelling.id, 1))?.status, 'cancelled');
  const fail = await running('fail');
  assert.equal((await store.restart(fail.id, 1))?.status, 'failed');
  assert.equal((await store.get(fail.id))!.error?.code, 'server_restarted');
});

test('the visible table: steps back and skipped states are caught', () => {
  assert.equal(visibleStepViolation(['queued', 'loading', 'running', 'succeeded']), null);
  assert.equal(visibleStepViolation(['running', 'queued']), 'running -> queued');
  assert.equal(visibleStepViolation(['running', 'loading']), 'running -> loading');
  assert.equal(visibleStepViolation(['queued', 'running']), 'queued -> running');
  assert.equal(visibleStepViolation(['queued', 'running'], true), null, 'a poller may miss loading');
  assert.equal(visibleStepViolation(['running', 'loading'], true), 'running -> loading');
  assert.equal(visibleStepViolation(['succeeded', 'running'], true), 'succeeded -> running');
});

/** A tool task (always `retry`) that asked its caller `answers` times, each answered, and runs its next attempt. */
async function answeredTool(store: TaskStore, answers: number) {
  const task = await store.create(newTask({ kind: 'tool', model: 'tools', onRestart: 'retry' }));
  let claimed = await store.claim(task.id, 'w1', 60_000, { start: true });
  for (let i = 0; i < answers; i++) {
    const question = { method: 'elicitation/create', params: { message: `Question ${i}?` } };
    assert.equal((await store.requestInput(task.id, claimed.attempt, { [`q${i}`]: question })).parked, true);
    await store.provideInput(task.id, 'tenant-a', { [`q${i}`]: { action: 'accept' } });
    claimed = await store.claim(task.id, 'w1', 60_000, { start: true });
  }
  return claimed;
}

test('answered questions are no interruptions: a tool task that asked 4 times is restarted at its first drain', async () => {
  const task = await answeredTool(h.store, 4);
  assert.equal(task.attempt, 5, 'each answer resumes the task under a new attempt');
  assert.equal((await h.store.restart(task.id, task.attempt))?.status, 'queued');
  const requeued = (await h.store.get(task.id))!;
  assert.equal(requeued.status, 'queued');
  assert.equal(requeued.error, null);
});

test('interruptions past TASKLINE_MAX_ATTEMPTS end a task failed with server_restarted, the count in its detail', async () => {
  const store = capped(2);
  const task = await answeredTool(store, 3);
  assert.equal((await store.restart(task.id, task.attempt, 'worker_lost'))?.status, 'queued');
  const again = await store.claim(task.id, 'w2', 60_000, { start: true });
  assert.equal((await store.restart(task.id, again.attempt, 'worker_lost'))?.status, 'failed');
  const ended = (await store.get(task.id))!;
  assert.equal(ended.error?.code, 'server_restarted');
  assert.match(ended.error!.detail, /\binterrupted 2 times\b/);
});

test('a claim keeps its attempt’s trace context for the next attempt; an untraced one leaves none', async () => {
  const created = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
  const first = '00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01';
  const task = await h.store.create(newTask({ onRestart: 'retry', traceparent: created }));
  assert.deepEqual(await h.store.traceContexts([task.id]), [{ task: created, attempt: null }]);
  await h.store.claim(task.id, 'w1', 60_000, { start: true, traceparent: first });
  assert.equal((await h.store.get(task.id))!.status, 'running', 'the running start still goes with it');
  // The restart reports the contexts it found: the attempt it ended is the one a restart links to.
  assert.deepEqual((await h.store.restart(task.id, 1))?.traces, { task: created, attempt: first });
  // What the next dispatch reads: the create's context, and the attempt the restart ended.
  assert.deepEqual(await h.store.traceContexts([task.id, 'task_gone']), [
    { task: created, attempt: first },
    { task: null, attempt: null },
  ]);
  // An attempt that is not traced: nothing to link to, not the one before it either.
  await h.store.claim(task.id, 'w2', 60_000);
  assert.equal((await h.store.restart(task.id, 2))?.status, 'queued');
  assert.deepEqual(await h.store.traceContexts([task.id]), [{ task: created, attempt: null }]);
});
