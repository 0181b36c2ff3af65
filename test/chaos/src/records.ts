import type { Redis } from 'ioredis';
import { scanKeys } from '@taskline/testing';

/**
 * Every task's stored state: record hash, event log, input requests/answers and token snapshot,
 * keyed by task id. Two snapshots compare equal exactly when no stored task changed.
 */
export async function snapshotTasks(redis: Redis): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const key of await scanKeys(redis, 'tl:{*}:task')) {
    const id = key.slice('tl:{'.length, -'}:task'.length);
    const [record, events, inputs, tokens] = await Promise.all([
      redis.hgetall(key),
      redis.xrange(`tl:{${id}}:events`, '-', '+'),
      redis.hgetall(`tl:{${id}}:inputs`),
      redis.get(`tl:{${id}}:tokens`),
    ]);
    out.set(id, JSON.stringify({ record, events, inputs, tokens }));
  }
  return out;
}

/** Ids whose stored state differs between two snapshots (changed, vanished or new). */
export function changedTasks(before: Map<string, string>, after: Map<string, string>): string[] {
  const ids = new Set([...before.keys(), ...after.keys()]);
  return [...ids].filter((id) => before.get(id) !== after.get(id)).sort();
}
