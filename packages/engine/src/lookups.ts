/** Reads and subscriptions services need beside `TaskStore`, so that none builds an engine key. */
import type { Redis } from 'ioredis';
import { taskKeys, workerCancelChannel } from './keys.js';
import { isTaskStatus, type TaskStatus } from './states.js';

/**
 * Each task's status, null for one that is gone (expired, never written): one write of separate
 * commands (auto-pipelined), not a pipeline, which on a Redis Cluster must stay on one node.
 */
export async function taskStatuses(redis: Redis, ids: readonly string[]): Promise<(TaskStatus | null)[]> {
  const replies = await Promise.all(ids.map((id) => redis.hget(taskKeys(id).task, 'status')));
  return replies.map((status) => (isTaskStatus(status) ? status : null));
}

/**
 * Subscribes `sub` to the cancels of the tasks `workerId` holds: cancel.lua publishes the id of
 * each task going `cancelling` on its worker's channel (one per worker, not one per task).
 */
export async function subscribeCancels(sub: Redis, workerId: string): Promise<void> {
  await sub.subscribe(workerCancelChannel(workerId));
}
