/**
 * A worker's claim of a queued task (claim.lua), with its lease index entry in the scheduler's
 * `{sched}` slot: written before the claim, and as it was again when the claim is refused.
 */
import type { StoreCore } from './core.js';
import { notFound } from './errors.js';
import { queueTenant, schedulerKeys, taskKeys } from './keys.js';
import { check, parseTask, type TaskRecord } from './records.js';
import { statusEvent } from './response.js';

/**
 * A worker takes a queued task: it becomes `loading` under a new attempt and a lease, and with
 * `start` (the worker has the model loaded) goes on to `running` in the same step. `offered` is
 * the attempt its job was dispatched for (`DispatchJob.attempt`): a job of an older offer is
 * refused (`stale_attempt`, see claim.lua).
 */
export async function claimTask(
  core: StoreCore,
  id: string,
  workerId: string,
  leaseMs: number,
  opts: { start?: boolean; offered?: number } = {},
): Promise<TaskRecord> {
  const keys = taskKeys(id);
  const event = statusEvent('loading', { worker: workerId });
  const running = opts.start ? statusEvent('running') : null;
  // Indexed before the claim: a worker that dies right after claiming still leaves a lease to
  // sweep. On one Redis, one round trip: index entry (with the one it replaces) and claim are
  // sent together and run in that order; on a cluster the claim waits for the entry (another node).
  const deadline = core.now() + leaseMs;
  const indexed = Promise.all([
    core.redis.zscore(schedulerKeys.leases, id),
    core.redis.zadd(schedulerKeys.leases, deadline, id),
  ]);
  await core.indexFirst(indexed);
  const claimed = core.scripts.claim(
    keys.task,
    keys.events,
    keys.channel,
    core.now(),
    workerId,
    leaseMs,
    event.type,
    JSON.stringify(event.data),
    opts.offered ?? '',
    ...(running ? [running.type, JSON.stringify(running.data)] : []),
  );
  const [index, reply] = await Promise.allSettled([indexed, claimed]);
  if (reply.status === 'rejected') throw reply.reason;
  // Refused because the task is gone or finished: drop the entry (no attempt can hold one any
  // more), and an ended task's place in its running set, which dispatch gave a job of an offer
  // that landed after the end (a cancel between a requeue and its offer). Refused for a task
  // that goes on (a newer attempt's, or taken): the entry as it was, only while it is still the
  // one written here (lease_unindex.lua: a claim that went through since keeps its own), and the
  // running place untouched, which is the current offer's.
  const [refusal, , tenant, parent] = reply.value as string[];
  if (refusal === 'missing') await core.redis.zrem(schedulerKeys.leases, id);
  else if (refusal === 'terminal') {
    const running = schedulerKeys.active(queueTenant({ tenant: tenant!, parent: parent || null }));
    await core.redis.multi().zrem(schedulerKeys.leases, id).zrem(running, id).exec();
  } else if (refusal !== 'ok' && index.status === 'fulfilled') {
    const [replaced] = index.value;
    await core.scripts.lease_unindex(
      schedulerKeys.leases,
      id,
      deadline,
      ...(replaced === null ? [] : [replaced]),
    );
  }
  check(id, reply.value);
  // The claim went through without its index entry: write it now, before any work starts.
  if (index.status === 'rejected') await core.redis.zadd(schedulerKeys.leases, deadline, id);
  // The script hands back the record as it left it: no read of our own.
  const record = reply.value[3] as unknown as (string | number)[];
  const raw: Record<string, string> = {};
  for (let i = 0; i < record.length; i += 2) raw[record[i]!] = String(record[i + 1]);
  if (!raw.id) throw notFound();
  const task = parseTask(raw);
  core.observe(task.kind, 'loading', task.createdAt);
  if (opts.start) core.observe(task.kind, 'running', task.createdAt);
  return task;
}
