/**
 * The create path: journal, record and offer in one round trip (docs/engine.md, "The flow of
 * one task", steps 2 and 3).
 */
import type { StoreCore } from './core.js';
import { TasklineError } from './errors.js';
import { newId } from './ids.js';
import { queueTenant, taskKeys } from './keys.js';
import { indexCreated } from './operator-index.js';
import { createdFields, parseTask, type NewTask, type TaskRecord } from './records.js';
import { emptyResponse, statusEvent } from './response.js';
import type { ScriptReply } from './scripts.js';

/**
 * Persists a task in `queued` with its `response.created` event, then queues it for dispatch.
 * The create journal (`intake`) is written first, so a crash after the record is written but
 * before it is queued leaves a trace the reconciler repairs. `alongside` (the caller's writes
 * that go to disk with the record) is called as the record's writes are sent, not before: a
 * write sent before the record's fields are known would make the read they wait for (the
 * webhook question) wait for its fsync, a second durable step before the `202`.
 */
export async function persist(
  core: StoreCore,
  input: NewTask,
  alongside?: () => unknown,
): Promise<TaskRecord> {
  const id = input.id ?? newId('task');
  // A fresh id has nothing left under it to clear, and its enqueue goes out in the same round
  // trip, behind the record (Redis runs them in order), so the scheduler hears of the task one
  // round trip sooner. (It is still checked: see create.lua.)
  const fresh = input.id === undefined || input.fresh === true;
  const now = core.now();
  const fields = await recordFields(core, input, id);
  // Sent in this turn of the event loop with the journal and the record: one write, one fsync.
  alongside?.();
  // On one Redis, journal and record in one round trip: both are sent before either reply is
  // read, and Redis runs (and, with appendfsync always, logs) them in the order sent, so no
  // record is on disk without its journal entry before it.
  const journalled = core.sched.journal(id, now);
  // On a Redis Cluster the two are on different nodes: the record waits for the journal entry, so
  // no failover there leaves a record nothing would offer (two more round trips, there only).
  await core.indexFirst(journalled);
  const written = writeRecord(core, input, fields, now, fresh);
  // The journal entry stays until the record is known written: were the record late (its
  // script retried after a Redis restart emptied the script cache) or failed, the worker's claim
  // refuses the job of a task not there yet, and the reconciler queues it again from the journal.
  // The operator index (another slot) rides in the same round trip, and is waited for with the
  // rest, so a listing right after the create shows it (on a cluster it is on a node of its own);
  // a lost entry costs only the listing.
  const indexed = indexCreated(core.redis, core.scripts, { id, tenant: input.tenant, createdAt: now }).catch(
    () => undefined,
  );
  const queued = fresh ? enqueueFresh(core, input, id, now) : null;
  const [journal, reply, enqueued] = await Promise.allSettled([journalled, written, queued, indexed]);
  if (reply.status === 'rejected') throw reply.reason;
  const task = await createdTask(core, input, fields, now, reply.value);
  await settleQueue(core, task, fresh && enqueued.status === 'fulfilled', journal.status === 'rejected');
  if (enqueued.status === 'fulfilled' && enqueued.value === 'dispatched' && reply.value[0] === 'ok')
    handOff(core, task, writtenFields(fields, now, reply.value));
  return task;
}

/**
 * The most a record may hold (its fields' characters) and still travel with its job: a larger one
 * (a long request) is read back by the worker, a round trip that costs less than a second copy of
 * it in BullMQ's job, its append-only file and memory.
 */
export const CARRIED_RECORD_MAX_CHARS = 16 * 1024;

/**
 * The record a job for task `id` carried (HandOff.record), as the worker of its first attempt runs
 * it: null when there is none or it is not that fresh task's (then the worker reads the record).
 */
export function carriedRecord(fields: unknown, id: string): TaskRecord | null {
  if (typeof fields !== 'object' || fields === null) return null;
  const raw = fields as Record<string, unknown>;
  if (!Object.values(raw).every((v) => typeof v === 'string')) return null;
  if (raw.id !== id || raw.status !== 'queued' || raw.attempt !== '0') return null;
  try {
    return parseTask(raw as Record<string, string>);
  } catch {
    return null;
  }
}

/**
 * Queues the job of a task its create dispatched on a lent slot, then takes the pick out of
 * flight; not awaited (see `TaskStoreOptions.handOff`). A task whose record was not written gets
 * no job: its pick and place are dropped by the sweeps.
 */
function handOff(core: StoreCore, task: TaskRecord, record: Record<string, string>): void {
  let size = 0;
  for (const value of Object.values(record)) size += value.length;
  const dispatched = {
    id: task.id,
    tenant: queueTenant(task),
    model: task.model,
    attempt: task.attempt,
    seq: task.seq,
    ...(task.traceparent && { traceparent: task.traceparent }),
    ...(size <= CARRIED_RECORD_MAX_CHARS && { record }),
  };
  core.options.handOff!(dispatched)
    .then(() => core.sched.pickHandled(task.id))
    .catch(() => undefined);
}

/** The record's fields as create.lua writes them. */
async function recordFields(core: StoreCore, input: NewTask, id: string): Promise<Record<string, string>> {
  const fields: Record<string, string> = {
    id,
    tenant: input.tenant,
    kind: input.kind,
    model: input.model,
    on_restart: input.onRestart,
    response_id: `resp_${id.slice('task_'.length)}`,
    request: JSON.stringify(input.request),
    ...(input.parent !== undefined && { parent: input.parent }),
    ...(input.idempotencyKey !== undefined && { idempotency_key: input.idempotencyKey }),
    ...(input.traceparent !== undefined && { traceparent: input.traceparent }),
  };
  // Asked before the record is written: the relay's index of the task comes first, so a task
  // whose scripts record deliveries is always one the relay visits.
  if (input.parent === undefined && (await core.options.watchWebhooks?.({ id, tenant: input.tenant })))
    fields.hooks = '1';
  return fields;
}

/** Runs create.lua: the record and its `response.created` event, unless the id is taken or gone. */
function writeRecord(
  core: StoreCore,
  input: NewTask,
  fields: Record<string, string>,
  now: number,
  fresh: boolean,
): Promise<ScriptReply> {
  const keys = taskKeys(fields.id!);
  const created = statusEvent('queued', {
    response: emptyResponse(
      { responseId: fields.response_id!, createdAt: now, model: input.model, request: input.request },
      'queued',
    ),
  });
  return core.scripts.create(
    keys.task,
    keys.events,
    keys.channel,
    keys.inputs,
    keys.tokens,
    keys.created,
    now,
    fresh ? '1' : '0',
    // Only a create an Idempotency-Key record names can be retried after its task expired. Twice
    // the record's lifetime: set after the record, it outlives it even on a node whose clock
    // differs (a failover).
    input.idempotencyKey === undefined ? 0 : 2 * core.options.idempotencyTtlS * 1000,
    Object.keys(fields).length,
    ...Object.entries(fields).flat(),
    'response.created',
    JSON.stringify(created.data),
  );
}

/**
 * Offers a fresh id's task to the scheduler in the create's round trip. Its queued state is
 * known: attempt 0, and its one event, `response.created`, is number 1.
 */
function enqueueFresh(core: StoreCore, input: NewTask, id: string, now: number) {
  const offer = { id, tenant: input.tenant, createdAt: now, model: input.model, attempt: 0, seq: 1 };
  const task = { ...offer, parent: input.parent ?? null };
  // A process that can queue the job takes a lent slot where there is one (see handOff).
  return core.options.handOff ? core.sched.offerOrTake(task) : core.enqueue(task, true);
}

/** The task create.lua answered for: the one it wrote, or the one already under a retried id. */
async function createdTask(
  core: StoreCore,
  input: NewTask,
  fields: Record<string, string>,
  now: number,
  reply: ScriptReply,
): Promise<TaskRecord> {
  const id = fields.id!;
  if (reply[0] === 'gone') {
    // Nothing was written under the id; a ready entry sent with it is refused by the claim.
    await core.sched.unjournal(id);
    throw new TasklineError('task_not_found', `task ${id} was created and has expired: its id is not reused`);
  }
  // A new record is exactly what the script wrote: no read back. A retried id reads what is there.
  const task = reply[0] === 'ok' ? parseTask(writtenFields(fields, now, reply)) : await core.get(id);
  if (!task) throw new TasklineError('internal_error', `task ${id} vanished right after ${reply[0]}`);
  if (task.tenant !== input.tenant)
    throw new TasklineError('internal_error', 'task id collision across tenants');
  if (reply[0] === 'ok') core.observe(task.kind, 'queued', task.createdAt);
  return task;
}

/** Every field of a new record, as create.lua wrote it (its reply 'ok' names the event's seq). */
function writtenFields(
  fields: Record<string, string>,
  now: number,
  reply: ScriptReply,
): Record<string, string> {
  return { ...fields, ...createdFields(now, Number(reply[1])) };
}

/**
 * A fresh id's enqueue went with the record. Otherwise it is not awaited: the record and its
 * journal entry are on disk, which is what the caller may acknowledge; a lost enqueue leaves
 * the journal entry the reconciler queues from. It is sent before this returns, so this
 * connection's later commands see the task queued. Without a journal entry (its write
 * failed) nothing would repair a lost enqueue: wait for it.
 */
async function settleQueue(
  core: StoreCore,
  task: TaskRecord,
  enqueuedWithRecord: boolean,
  journalFailed: boolean,
): Promise<void> {
  if (task.status !== 'queued') await core.sched.unjournal(task.id);
  else if (enqueuedWithRecord) {
    // Not awaited: a journal entry left behind only makes the reconciler look at a dispatched task.
    core.sched.unjournal(task.id).catch(() => undefined);
  } else if (journalFailed) await core.enqueue(task);
  else core.enqueue(task).catch(() => undefined);
}
