/**
 * Idempotent creates (LMSP 1.0 section 9.2): the record is written before the task and names its
 * id, so a retry after a crash anywhere in the create path finds that same task.
 */
import { createHash } from 'node:crypto';
import type { StoreCore } from './core.js';
import { TasklineError } from './errors.js';
import { newId } from './ids.js';
import { idempotencyKey } from './keys.js';
import type { NewTask, TaskRecord } from './records.js';

/** The record of a tenant's Idempotency-Key (`{<tenant>}` slot). */
export const recordKeyOf = (tenant: string, key: string) =>
  idempotencyKey(tenant, createHash('sha256').update(key).digest('hex'));

const reused = () =>
  new TasklineError('idempotency_key_reused', 'This Idempotency-Key was used with a different request.');

/**
 * The task an earlier create with this key and body made, without reserving anything: lets a
 * caller answer a retry with its task even when a new create would be refused (say, by a cap).
 */
export async function findIdempotent(
  core: StoreCore,
  tenant: string,
  key: string,
  fingerprint: string,
): Promise<TaskRecord | null> {
  const [taskId, stored] = await core.redis.hmget(recordKeyOf(tenant, key), 'task', 'fingerprint');
  if (!taskId) return null;
  if (stored !== fingerprint) throw reused();
  return core.get(taskId, tenant);
}

/**
 * Reserves an Idempotency-Key for a create. `replay` names a task an earlier request with the
 * same key and body made; `taskId` is the id to create under otherwise: `candidate` (an id drawn
 * for this create, by default one drawn here) for a new key or one whose task has expired, an
 * abandoned create's for a takeover.
 */
export async function beginIdempotent(
  core: StoreCore,
  tenant: string,
  key: string,
  fingerprint: string,
  candidate: string = newId('task'),
): Promise<{ taskId: string; replay: TaskRecord | null; recordKey: string }> {
  const recordKey = recordKeyOf(tenant, key);
  // The id a `done` record named whose task is gone: the record and the task are in different
  // slots, so that is found here and the script re-points the record only if it still names it.
  let gone = '';
  for (;;) {
    const reply = await core.scripts.idempotency_begin(
      recordKey,
      core.now(),
      candidate,
      fingerprint,
      core.options.idempotencyPendingMs,
      core.options.idempotencyTtlS,
      gone,
    );
    const [state, taskId] = reply as [string, string];
    if (state === 'reused') throw reused();
    if (state === 'new') return { taskId, replay: null, recordKey };
    const existing = await core.get(taskId, tenant);
    if (existing) {
      await core.scripts.idempotency_finish(recordKey, taskId);
      return { taskId, replay: existing, recordKey };
    }
    if (state === 'pending') {
      throw new TasklineError(
        'idempotency_key_in_use',
        'A request with this Idempotency-Key is still being accepted.',
      );
    }
    // A takeover of an abandoned create: create it now, under its id (create.lua refuses that id
    // if its task was written and has since expired: see createIdempotent).
    if (state === 'takeover') return { taskId, replay: null, recordKey };
    // `done` whose task has expired: the key is free again (an expired task reads like one that
    // never existed), and a new task under the old id would restart its event numbers there.
    gone = taskId;
  }
}

export async function finishIdempotent(core: StoreCore, recordKey: string, taskId: string): Promise<void> {
  await core.scripts.idempotency_finish(recordKey, taskId);
}

/** Creates a task once per (tenant, Idempotency-Key); same key and body give the same task. */
export async function createIdempotent(
  core: StoreCore,
  create: (input: NewTask) => Promise<TaskRecord>,
  input: NewTask,
  key: string,
  fingerprint: string,
): Promise<{ task: TaskRecord; replayed: boolean }> {
  // The key lands on the record (for operators): bounded as LMSP's Idempotency-Key header is.
  if (key.length > 255)
    throw new TasklineError('invalid_request', 'An idempotency key is at most 255 characters.');
  // An id drawn for this create (its place under the cap is held under it) is the one a new key's
  // task takes; still fresh then, as nothing else can have it.
  let drawn = input.fresh === true ? input.id : undefined;
  for (;;) {
    const begun = await beginIdempotent(core, input.tenant, key, fingerprint, drawn);
    // A replay may answer a retry of a create whose first answer was replication_timeout.
    if (begun.replay) {
      await core.replicated(begun.replay.id, begun.recordKey);
      return { task: begun.replay, replayed: true };
    }
    const fresh = drawn !== undefined && begun.taskId === drawn;
    try {
      const task = await create({ ...input, id: begun.taskId, fresh, idempotencyKey: key });
      await finishIdempotent(core, begun.recordKey, task.id);
      return { task, replayed: false };
    } catch (err) {
      if (!(err instanceof TasklineError && err.code === 'task_not_found')) throw err;
      // The id's task was written and has expired (a takeover of a create that died before marking
      // the key, or this create stalled past its hold): the key's create did finish, so the record
      // is marked so, and begin re-points it to a new id as for any `done` key whose task is gone.
      await finishIdempotent(core, begun.recordKey, begun.taskId);
      if (begun.taskId === drawn) drawn = newId('task');
    }
  }
}
