/**
 * The read side of a task's webhook outbox (`tl:{<id>}:outbox`, written by `_emit.lua`): what the
 * webhook relay reads and deletes, so no package outside the engine names a task's keys.
 */
import type { Redis } from 'ioredis';
import { taskKeys } from './keys.js';

/** One outbox entry: the numbers of the events one script wrote that webhooks may be told of. */
export interface OutboxEntry {
  /** The stream entry's id, what `dropOutboxEntries` deletes. */
  entry: string;
  seqs: number[];
}

/** The pending entries of each task's outbox, oldest first (one pipelined read). */
export async function readOutboxes(
  redis: Redis,
  ids: string[],
  count = 100,
): Promise<Map<string, OutboxEntry[]>> {
  const replies = await Promise.all(
    ids.map((id) => redis.xrange(taskKeys(id).outbox, '-', '+', 'COUNT', count)),
  );
  const found = new Map<string, OutboxEntry[]>();
  ids.forEach((id, i) => {
    const entries = (replies[i] ?? []).map(([entry, fields]) => ({ entry, seqs: parseSeqs(fields) }));
    if (entries.length > 0) found.set(id, entries);
  });
  return found;
}

function parseSeqs(fields: string[]): number[] {
  const at = fields.indexOf('seqs');
  return at < 0 ? [] : (fields[at + 1] ?? '').split(',').map(Number);
}

/** Deletes entries whose deliveries are queued (an emptied stream stays until `dropOutbox`). */
export async function dropOutboxEntries(redis: Redis, id: string, entries: string[]): Promise<void> {
  if (entries.length > 0) await redis.xdel(taskKeys(id).outbox, ...entries);
}

/** Deletes a task's outbox: the task is gone, nothing can be delivered for it. */
export async function dropOutbox(redis: Redis, id: string): Promise<void> {
  await redis.del(taskKeys(id).outbox);
}
