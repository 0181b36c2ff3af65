import type { Redis } from 'ioredis';
import { taskKeys } from '@taskline/engine/keys';
import { createTask } from './http.js';
import { sleep } from './stats.js';

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);

/** Creates `n` tasks over HTTP with `concurrency` requests in flight; ids in creation order. */
export async function createMany(
  apiUrl: string,
  n: number,
  concurrency: number,
  input: (i: number) => Record<string, unknown>,
): Promise<string[]> {
  const ids: string[] = new Array<string>(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, n) }, async () => {
      while (next < n) {
        const i = next++;
        ids[i] = await createTask(apiUrl, input(i));
      }
    }),
  );
  return ids;
}

export interface Ended {
  /** Latest `updated_at` of the tasks (when the last one ended), epoch ms. */
  lastEndAt: number;
  statuses: Record<string, number>;
  /** HMGET commands this wait sent, to take out of Redis command counts. */
  pollCommands: number;
}

/**
 * Waits until every task is terminal by reading the records (HMGET status, updated_at) every
 * `everyMs`; the end time comes from the records, so polling does not blur it. Tasks end roughly
 * in creation order, so each poll reads pending ids oldest first, a chunk at a time, and stops at
 * the first chunk with a task still open: polling costs the stack under test next to nothing
 * (the raw BullMQ side waits on its worker's own count, with no reads at all).
 */
export async function waitEnded(
  redis: Redis,
  ids: string[],
  everyMs = 50,
  timeoutMs = 600_000,
): Promise<Ended> {
  const CHUNK = 64;
  let pending = [...ids];
  let lastEndAt = 0;
  let pollCommands = 0;
  const statuses: Record<string, number> = {};
  const deadline = Date.now() + timeoutMs;
  while (pending.length > 0) {
    if (Date.now() > deadline)
      throw new Error(`${pending.length} tasks still not ended after ${timeoutMs} ms`);
    const still: string[] = [];
    let from = 0;
    while (from < pending.length) {
      const chunk = pending.slice(from, from + CHUNK);
      from += chunk.length;
      // Sent in one tick, not as a pipeline: the connection's auto-pipelining batches them per
      // node, where a cluster refuses one pipeline over several slots.
      const rows = await Promise.all(
        chunk.map((id) => redis.hmget(taskKeys(id).task, 'status', 'updated_at')),
      );
      pollCommands += chunk.length;
      chunk.forEach((id, i) => {
        const [status, updatedAt] = rows[i] ?? [];
        if (status && TERMINAL.has(status)) {
          statuses[status] = (statuses[status] ?? 0) + 1;
          lastEndAt = Math.max(lastEndAt, Number(updatedAt));
        } else still.push(id);
      });
      if (still.length) break;
    }
    pending = [...still, ...pending.slice(from)];
    if (pending.length) await sleep(everyMs);
  }
  return { lastEndAt, statuses, pollCommands };
}
