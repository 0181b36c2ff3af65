// Tool checkpoints: one JSON slot on the task record, written fenced by attempt (checkpoint.lua).
import type { StoreCore } from './core.js';
import { taskKeys } from './keys.js';
import { check } from './records.js';

/** Replaces the task's checkpoint with `state` (JSON); refused unless `attempt` runs the task. */
export async function writeCheckpoint(
  core: StoreCore,
  id: string,
  attempt: number,
  state: string,
): Promise<void> {
  const reply = await core.scripts.checkpoint(taskKeys(id).task, core.now(), attempt, state);
  check(id, reply);
}

/** The task's last checkpoint (JSON text), or null when none was written. */
export function readCheckpoint(core: StoreCore, id: string): Promise<string | null> {
  return core.redis.hget(taskKeys(id).task, 'checkpoint');
}
