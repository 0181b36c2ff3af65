/**
 * Recovery: lapsed leases and drained attempts get their `on_restart` policy (LMSP 1.0 section
 * 7.5, planned in restart.ts), and the create journal is reconciled with the ready index.
 */
import { sweepEach, type StoreCore, type SweepFailed, type SweptTask } from './core.js';
import { problem, TasklineError, type Problem } from './errors.js';
import type { TaskRecord } from './records.js';
import { restartPlan, type Recovered, type RestartReason } from './restart.js';
import { isTerminal } from './states.js';

/**
 * Applies LMSP 7.5 to a task whose lease lapsed by Redis's clock (`aheadMs` later: tests look
 * ahead); null when there was nothing to do. The script judges the lease, by the clock that
 * stamped it: no process's clock is compared with another's.
 */
export async function recoverTask(core: StoreCore, id: string, aheadMs = 0): Promise<Recovered | null> {
  const task = await core.get(id);
  if (!task || task.leaseUntil === null) return null;
  return restartTask(core, task, 'worker_lost', aheadMs);
}

/**
 * Applies LMSP 7.5 to an attempt its worker cannot finish, fenced by that attempt: one a draining
 * worker still runs at its deadline (`worker_draining`), or one whose model died under it
 * (`worker_lost`, as if the whole worker had). A task cancelled meanwhile ends `cancelled`.
 */
export async function restartAttempt(
  core: StoreCore,
  id: string,
  attempt: number,
  reason: RestartReason,
): Promise<Recovered | null> {
  // Two tries: a cancel may land between the read and the write (`illegal` from the old state).
  for (let i = 0; i < 2; i++) {
    const task = await core.get(id);
    if (!task || task.attempt !== attempt || task.status === 'queued') return null;
    const done = await restartTask(core, task, reason);
    if (done) return done;
  }
  return null;
}

/** One restart (see restart.ts): the transition, then the queue or the cleanup it needs. */
async function restartTask(
  core: StoreCore,
  task: TaskRecord,
  reason: RestartReason,
  leaseLapsedAhead?: number,
): Promise<Recovered | null> {
  const snapshot = task.onRestart === 'resume' ? (await core.snapshot(task.id)).length : 0;
  const plan = restartPlan(task, reason, snapshot, problem, core.maxAttempts);
  if (!plan) return null;
  try {
    const seq = await core.transition(task.id, plan.to, {
      attempt: task.attempt,
      from: [task.status],
      leaseLapsedAhead,
      dropSnapshot: plan.dropSnapshot,
      fields: plan.fields,
      events: plan.events,
    });
    if (plan.to === 'queued') await core.enqueue({ ...task, seq });
    else
      await core.released(task, {
        failure: plan.fields.error ? (JSON.parse(plan.fields.error) as Problem).code : undefined,
      });
    const traces = { task: task.traceparent, attempt: task.attemptTraceparent };
    return { id: task.id, kind: task.kind, status: plan.to, policy: plan.policy, traces };
  } catch (err) {
    // A live lease is refused as `illegal_transition` too (renewed since the index was read).
    if (
      err instanceof TasklineError &&
      ['stale_attempt', 'task_terminal', 'illegal_transition'].includes(err.code)
    ) {
      return null;
    }
    throw err;
  }
}

/**
 * The recovery sweep: applies `recoverTask` to every task whose indexed lease lapsed, and drops
 * index entries of tasks nobody holds any more. Safe on any number of replicas at once.
 */
export async function sweepLeases(core: StoreCore, limit = 500, failed?: SweepFailed): Promise<Recovered[]> {
  // The index is scored by Redis's clock (lease_index.lua, renew.lua): read by it too.
  const { now, due } = await core.sched.dueLeases(limit);
  const recovered: Recovered[] = [];
  await sweepEach(
    due,
    async (id) => {
      const done = await recoverTask(core, id);
      if (done) recovered.push(done);
      const task = await core.get(id);
      if (!task || task.leaseUntil === null) await core.sched.unleaseAsRead(id, now);
    },
    failed,
  );
  return recovered;
}

/**
 * The reconciler: every create journalled more than `olderThanMs` ago either made a task, which
 * is queued now if it is still waiting, or failed before it was written, and is forgotten.
 */
export async function reconcileIntake(
  core: StoreCore,
  olderThanMs: number,
  limit = 500,
  failed?: SweepFailed,
): Promise<string[]> {
  const before = core.now() - olderThanMs;
  const ids = await core.sched.dueJournal(before, limit);
  const queued: string[] = [];
  await sweepEach(
    ids,
    async (id) => {
      const task = await core.get(id);
      if (task?.status === 'queued') {
        // Not offered when dispatched since the read (and perhaps claimed): see enqueue.lua.
        if (await core.enqueue(task)) queued.push(id);
      } else {
        // Only the entry listed: an answer may have journalled the task again since the read.
        await core.sched.unjournalAsRead(id, before);
      }
    },
    failed,
  );
  return queued;
}

/**
 * Picks whose dispatch died between the pick and the BullMQ add (`inflight` entries older than
 * `olderThanMs`): the entry is dropped, and a task still queued with no job (`hasJob`, the
 * dispatcher's queue) offered again at once, its pick's place with it. A pick whose job was
 * queued before the dispatcher died keeps its place: the job claims the task. Returns the
 * entries' ids.
 */
export async function reconcileDispatches(
  core: StoreCore,
  olderThanMs: number,
  hasJob: (task: TaskRecord) => Promise<boolean>,
  limit = 500,
  failed?: SweepFailed,
): Promise<string[]> {
  const stale = await core.sched.staleInflight(core.now() - olderThanMs, limit);
  await sweepEach(
    stale,
    async (id) => {
      const task = await core.get(id);
      // The pick's place is scored by the attempt its job would have started (dispatch.lua).
      if (task?.status === 'queued' && !(await hasJob(task)))
        await core.enqueue(task, false, task.attempt + 1);
      await core.sched.pickHandled(id);
    },
    failed,
  );
  return stale;
}

/**
 * Drops running-set entries (what caps a tenant's concurrency) of tasks that ended or expired, or
 * that wait parked for their caller's input, and offers again a task queued longer than
 * `olderThanMs` that is neither ready, nor picked by a dispatch still queueing its job, nor has a
 * job (`hasJob`: the dispatcher's queue, e.g. after a failed claim or a dispatcher that died
 * before its add). Returns how many entries it dropped.
 */
export async function sweepActive(
  core: StoreCore,
  olderThanMs: number,
  hasJob: (task: SweptTask) => Promise<boolean>,
  failed?: SweepFailed,
): Promise<number> {
  let dropped = 0;
  await sweepEach(
    await core.sched.runningPlaces(),
    async (place) => {
      const task = await core.peek(place.id);
      if (!task || isTerminal(task.status) || (task.parked && task.status === 'input_required')) {
        // Only the place read: an answer may have queued the task since, and its next attempt
        // been dispatched (a place of its own, scored by that attempt) and claimed.
        dropped += await core.sched.dropPlaceAsRead(place);
      } else if (task.status === 'queued' && task.updatedAt < core.now() - olderThanMs) {
        if (await core.sched.waitsForDispatch(place, task.model)) return;
        // No job: the place read may be its lost job's (scored one past the attempt), and goes.
        // One scored above it is a dispatch since, which keeps it (enqueue.lua).
        if (!(await hasJob(task)))
          await core.enqueue(task, false, Math.max(task.attempt, Number(place.score)));
      }
    },
    failed && ((place, error) => failed(place.id, error)),
  );
  return dropped;
}
