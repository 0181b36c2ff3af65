/** Reads and subscriptions services need beside `TaskStore`, so that none builds an engine key. */
import type { Redis } from 'ioredis';
import { taskKeys, workerCancelChannel } from './keys.js';
import { isTaskStatus, type TaskStatus } from './states.js';

/** Each task's status, null for one that is gone (expired, never written): one pipelined read. */
export async function taskStatuses(redis: Redis, ids: readonly string[]): Promise<(TaskStatus | null)[]> {
  if (ids.length === 0) return [];
  const pipeline = redis.pipeline();
  for (const id of ids) pipeline.hget(taskKeys(id).task, 'status');
  const replies = (await pipeline.exec()) ?? [];
  return ids.map((_, i) => {
    const status = (replies[i]?.[1] ?? null) as string | null;
    return isTaskStatus(status) ? status : null;
  });
}

/**
 * Subscribes `sub` to the cancels of the tasks `workerId` holds: cancel.lua publishes the id of
 * each task going `cancelling` on its worker's channel (one per worker, not one per task).
 */
export async function subscribeCancels(sub: Redis, workerId: string): Promise<void> {
  await sub.subscribe(workerCancelChannel(workerId));
}
