import type { Redis } from 'ioredis';

/** `INFO commandstats` as command -> calls. */
export async function commandCalls(redis: Redis): Promise<Map<string, number>> {
  const info = await redis.info('commandstats');
  const calls = new Map<string, number>();
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls.set(m[1]!, Number(m[2]));
  return calls;
}

export function diffCalls(after: Map<string, number>, before: Map<string, number>): Map<string, number> {
  const d = new Map<string, number>();
  for (const [cmd, n] of after) {
    const delta = n - (before.get(cmd) ?? 0);
    if (delta > 0) d.set(cmd, delta);
  }
  return d;
}

export async function usedMemory(redis: Redis): Promise<number> {
  const info = await redis.info('memory');
  return Number(/^used_memory:(\d+)/m.exec(info)?.[1] ?? NaN);
}

/** Bytes Redis attributes to each existing key (MEMORY USAGE, all samples of nested values). */
export async function keyBytes(redis: Redis, keys: string[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const key of keys) {
    const n = (await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) as number | null;
    if (n !== null) out[key] = n;
  }
  return out;
}
