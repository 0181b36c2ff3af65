/**
 * A worker's claim of a queued task (claim.lua), with its lease index entry in the scheduler's
 * index (`leases`): written before the claim, and as it was again when the claim is refused.
 */
import { flattenEvents, tokenList, type StoreCore } from './core.js';
import { notFound } from './errors.js';
import { newId } from './ids.js';
import { taskKeys } from './keys.js';
import { check, parseTask, type TaskRecord } from './records.js';
import { statusEvent, type EventInput } from './response.js';

/** What an attempt made before its claim: appended in the claim's own step (claim.lua ARGV[11 ..]). */
export interface FirstOutput {
  tokens: readonly number[];
  events: EventInput[];
}

export interface ClaimOptions {
  start?: boolean;
  offered?: number;
  nonce?: string;
  traceparent?: string;
  output?: FirstOutput;
}

/**
 * A worker takes a queued task: it becomes `loading` under a new attempt and a lease, and with
 * `start` (the worker has the model loaded) goes on to `running` in the same step, with `output`
 * (needs `start`) its first output appended too (TaskWorker's `Claimer`). `offered` is
 * the attempt its job was dispatched for (`DispatchJob.attempt`): a job of an older offer is
 * refused (`stale_attempt`, see claim.lua). `nonce` names the claim: a caller that makes it again
 * after a failure of unknown outcome (an `AbortError`, the reply lost) passes the same one, and gets
 * the claim that ran, if it ran. `traceparent` is the new attempt's span, kept for the next attempt
 * to link to.
 */
export async function claimTask(
  core: StoreCore,
  id: string,
  workerId: string,
  leaseMs: number,
  opts: ClaimOptions = {},
): Promise<TaskRecord> {
  const keys = taskKeys(id);
  const event = statusEvent('loading', { worker: workerId });
  const running = opts.start || opts.output ? statusEvent('running') : null;
  const output = opts.output ? [tokenList(opts.output.tokens), ...flattenEvents(opts.output.events)] : [];
  // Indexed before the claim: a worker that dies right after claiming still leaves a lease to
  // sweep. On one Redis, one round trip: index entry and claim are sent together and run in that
  // order; on a cluster the claim waits for the entry (another node). Only where the task has no
  // entry: one there (its holder's, an earlier attempt's) is never moved by a refused claim. The
  // deadline is Redis's clock's, as the lease's (lease_index.lua), never this worker's.
  const indexed = core.sched.leaseBeforeClaim(id, leaseMs);
  await core.indexFirst(indexed);
  const claimed = core.scripts.claim(
    keys.task,
    keys.events,
    keys.channel,
    keys.tokens,
    core.now(),
    workerId,
    leaseMs,
    event.type,
    JSON.stringify(event.data),
    opts.offered ?? '',
    // Its nonce: this claim re-sent (its reply lost) is answered as it was, not refused (claim.lua).
    opts.nonce ?? newId('step'),
    opts.traceparent ?? '',
    ...(running ? [running.type, JSON.stringify(running.data), ...output] : []),
  );
  const [index, reply] = await Promise.allSettled([indexed, claimed]);
  if (reply.status === 'rejected') throw reply.reason;
  const [refusal, , tenant, parent, attempt, lease] = reply.value as string[];
  const added = index.status === 'fulfilled' && Number(index.value[0]) === 1;
  const deadline = index.status === 'fulfilled' ? Number(index.value[1]) : 0;
  if (refusal !== undefined && refusal !== 'ok') {
    const owner = { tenant: tenant!, parent: parent || null };
    await core.sched.claimRefused(id, refusal, owner, { added, deadline, attempt: attempt!, lease: lease! });
  }
  check(id, reply.value);
  // The script hands back the record as it left it: no read of our own.
  const record = reply.value[3] as unknown as (string | number)[];
  const raw: Record<string, string> = {};
  for (let i = 0; i < record.length; i += 2) raw[record[i]!] = String(record[i + 1]);
  if (!raw.id) throw notFound();
  const task = parseTask(raw);
  // The claim went through without its index entry (the write failed, or another's was there):
  // this attempt's now, before any work starts.
  if (!added) await core.sched.leaseUntil(id, task.leaseUntil!);
  core.observe(task.kind, 'loading', task.createdAt);
  if (running) core.observe(task.kind, 'running', task.createdAt);
  return task;
}
