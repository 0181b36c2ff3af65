import type { Redis } from 'ioredis';
import { nowMs, sleep, summarize } from './stats.js';

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

export interface RoundTrips {
  /** One `SET` every 50 ms (20/s), as the hops of a quiet stack go: each wakes an idle process. */
  paced: { p50: number; p99: number };
  /** `SET`s back to back, each sent when the previous answered. */
  backToBack: { p50: number; p99: number };
}

/**
 * The host's floor for one durable write: a `SET` round trip on this Redis (with appendfsync
 * always it answers after the fsync), paced and back to back.
 */
export async function roundTrips(redis: Redis, samples: number): Promise<RoundTrips> {
  const time = async (gapMs: number) => {
    const ms: number[] = [];
    for (let i = 0; i < samples; i++) {
      const t = nowMs();
      await redis.set('bench:round-trip', String(i));
      ms.push(nowMs() - t);
      if (gapMs) await sleep(gapMs);
    }
    const { p50, p99 } = summarize(ms);
    return { p50, p99 };
  };
  const paced = await time(50);
  const backToBack = await time(0);
  await redis.del('bench:round-trip');
  return { paced, backToBack };
}
