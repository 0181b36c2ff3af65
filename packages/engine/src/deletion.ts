/**
 * Deleting a task (OpenAI's `DELETE /responses/{id}`): every key of an ended task at once,
 * through delete.lua, one slot. What else names it is dropped where it is read: its
 * operator index entry as the listing finds no record, an Idempotency-Key record as a retry finds
 * no task (the key is free again, as after the task's retention).
 */
import type { StoreCore } from './core.js';
import { notFound, TasklineError } from './errors.js';
import { taskKeys } from './keys.js';

export async function deleteEnded(core: StoreCore, id: string, tenant: string): Promise<void> {
  const keys = taskKeys(id);
  const [outcome, status] = (await core.scripts.delete(
    keys.task,
    keys.events,
    keys.inputs,
    keys.tokens,
    tenant,
  )) as [string, string?];
  if (outcome === 'missing') throw notFound();
  if (outcome === 'not_ended')
    throw new TasklineError(
      'task_not_deletable',
      `task ${id} is ${status}, not ended; cancel it, then delete it once it has ended.`,
      { status },
    );
  await core.replicated(id);
}
