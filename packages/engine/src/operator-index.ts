/**
 * The operator index's writes, beside the create and the end of a task (see `operatorKeys`). Apart
 * from the console's reads (operator.ts) so that the store, which writes them, needs nothing of it.
 */
import type { Redis } from 'ioredis';
import { operatorKeys } from './keys.js';
import type { TaskRecord } from './records.js';
import { serverTime } from './redis.js';
import type { Scripts } from './scripts.js';
import { sweepToolTaskIndexes, type IndexBounds } from './tool-index.js';

export const minuteOf = (ms: number) => Math.floor(ms / 60_000);
/** The throughput chart's fields: tasks created and ended in one minute. */
export const createdField = (minute: number) => `c:${minute}`;
export const endedField = (minute: number) => `e:${minute}`;
/** Minutes of throughput kept; the console charts the last fifteen. */
const THROUGHPUT_MINUTES = 60;
const COUNTER_TTL_S = 3600;
/** Failures are counted per 5 minutes; the console sums the last hour's twelve buckets. */
const FAILURE_BUCKET_MS = 5 * 60_000;
export const FAILURE_BUCKETS = 12;
export const bucketOf = (ms: number) => Math.floor(ms / FAILURE_BUCKET_MS);

/**
 * The operator index entries of a new task, sent in the create's round trip (not awaited on
 * their own: a lost entry costs only the listing, the task stays reachable by id). `NX` keeps a
 * retried create's first time. Bounds and expiry are the sweep's (sweepOperatorIndex), which finds
 * the tenant by Redis's clock (tenant_index.lua), not this writer's.
 */
export function indexCreated(
  redis: Redis,
  scripts: Pick<Scripts, 'tenant_index'>,
  task: Pick<TaskRecord, 'id' | 'tenant' | 'createdAt'>,
): Promise<unknown> {
  return Promise.all([
    redis.zadd(operatorKeys.tasks(task.tenant), 'NX', task.createdAt, task.id),
    scripts.tenant_index(operatorKeys.tenants, task.tenant),
    redis.hincrby(operatorKeys.throughput, createdField(minuteOf(task.createdAt)), 1),
  ]);
}

/**
 * Bounds the operator index of every tenant that created a task since `since` (ms, Redis's clock:
 * see operatorIndexClock) to its newest `max` entries and sets it to expire `retentionMs` from now,
 * sweeps the MCP tool-task indexes (`sweepToolTaskIndexes`: those tenants' and those with
 * unfinished tool tasks), drops the tenants that created nothing for `retentionMs` from the tenant
 * index (whose own indexes have expired by then), and drops throughput minutes over an hour old;
 * returns how many tenants it visited. Between two sweeps an index may pass its bound by the
 * creates in between. The throughput hash expires too, should sweeps stop altogether.
 */
export async function sweepOperatorIndex(
  redis: Redis,
  since: number,
  now: number,
  o: IndexBounds,
): Promise<number> {
  const tenants = await redis.zrangebyscore(
    operatorKeys.tenants,
    Number.isFinite(since) ? since : '-inf',
    '+inf',
  );
  const oldest = minuteOf(now) - THROUGHPUT_MINUTES;
  const quiet = (await operatorIndexClock(redis)) - o.retentionMs;
  // Separate commands (auto-pipelined): each tenant's index is its own slot.
  const [fields, visited] = await Promise.all([
    redis.hkeys(operatorKeys.throughput),
    sweepToolTaskIndexes(redis, tenants, now, o),
    Promise.all(
      tenants.flatMap((tenant) => [
        redis.zremrangebyrank(operatorKeys.tasks(tenant), 0, -(o.max + 1)),
        redis.pexpire(operatorKeys.tasks(tenant), o.retentionMs),
      ]),
    ),
  ]);
  const old = fields.filter((f) => Number(f.slice(2)) < oldest);
  await Promise.all([
    redis.zremrangebyscore(operatorKeys.tenants, '-inf', `(${quiet}`),
    old.length > 0 ? redis.hdel(operatorKeys.throughput, ...old) : null,
    redis.expire(operatorKeys.throughput, 2 * COUNTER_TTL_S),
  ]);
  return visited.length; // the creators, and the tenants with unfinished tool tasks
}

/** Redis's clock (ms) where the tenant index is scored: what the sweep's `since` is read by. */
export function operatorIndexClock(redis: Redis): Promise<number> {
  return serverTime(redis, operatorKeys.tenants);
}

/** How a released task ended (`failure`: the code of a `failed` end). */
export type TaskEnd = { failure?: string };

/**
 * Counts `ended` tasks for the throughput chart and, of those that failed, their tenants' failures
 * by code (beside the ending steps, in their round trip: a crash in between loses counts, nothing else).
 */
export function countEnded(
  redis: Redis,
  now: number,
  ended: number,
  failures: { tenant: string; code: string }[] = [],
): Promise<unknown> {
  const writes: Promise<unknown>[] = [];
  if (ended > 0) writes.push(redis.hincrby(operatorKeys.throughput, endedField(minuteOf(now)), ended));
  const byKey = new Map<string, Map<string, number>>();
  for (const { tenant, code } of failures) {
    const key = operatorKeys.failed(tenant, bucketOf(now));
    const codes = byKey.get(key) ?? new Map<string, number>();
    codes.set(code, (codes.get(code) ?? 0) + 1);
    byKey.set(key, codes);
  }
  for (const [key, codes] of byKey) {
    for (const [code, n] of codes) writes.push(redis.hincrby(key, code, n));
    writes.push(redis.expire(key, COUNTER_TTL_S + 300));
  }
  return Promise.all(writes);
}
