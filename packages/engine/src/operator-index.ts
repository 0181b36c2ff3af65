/**
 * The operator index's writes, beside the create and the end of a task (see `operatorKeys`). Apart
 * from the console's reads (operator.ts) so that the store, which writes them, needs nothing of it.
 */
import type { Redis } from 'ioredis';
import { operatorKeys } from './keys.js';
import type { TaskRecord } from './records.js';

export const minuteOf = (ms: number) => Math.floor(ms / 60_000);
const COUNTER_TTL_S = 3600;
/** Failures are counted per 5 minutes; the console sums the last hour's twelve buckets. */
const FAILURE_BUCKET_MS = 5 * 60_000;
export const FAILURE_BUCKETS = 12;
export const bucketOf = (ms: number) => Math.floor(ms / FAILURE_BUCKET_MS);

export interface OperatorIndexOptions {
  /** Newest entries kept per tenant. */
  max: number;
  /** The tenant's index expires this long after its last create (the task retention). */
  retentionMs: number;
}

/**
 * The operator index entries of a new task, sent in the create's round trip (not awaited on
 * their own: a lost entry costs only the listing, the task stays reachable by id). `NX` keeps a
 * retried create's first time.
 */
export function indexCreated(
  redis: Redis,
  task: Pick<TaskRecord, 'id' | 'tenant' | 'createdAt'>,
  o: OperatorIndexOptions,
): Promise<unknown> {
  const key = operatorKeys.tasks(task.tenant);
  const counter = operatorKeys.created(minuteOf(task.createdAt));
  return Promise.all([
    redis.zadd(key, 'NX', task.createdAt, task.id),
    redis.zremrangebyrank(key, 0, -(o.max + 1)),
    redis.pexpire(key, o.retentionMs),
    redis.zadd(operatorKeys.tenants, task.createdAt, task.tenant),
    redis.incr(counter),
    redis.expire(counter, COUNTER_TTL_S),
  ]);
}

/** How a released task left its worker: it ended (`failure`: the code of a `failed` end), or it parked for input. */
export type TaskEnd = { failure?: string } | 'parked';

/**
 * Counts one ended task for the throughput chart and, when it failed, its tenant's failures by
 * code (beside the ending step, in its round trip: a crash in between loses one count, nothing else).
 */
export function countEnded(redis: Redis, now: number, tenant: string, failure?: string): Promise<unknown> {
  const counter = operatorKeys.ended(minuteOf(now));
  const writes: Promise<unknown>[] = [redis.incr(counter), redis.expire(counter, COUNTER_TTL_S)];
  if (failure !== undefined) {
    const failed = operatorKeys.failed(tenant, bucketOf(now));
    writes.push(redis.hincrby(failed, failure, 1), redis.expire(failed, COUNTER_TTL_S + 300));
  }
  return Promise.all(writes);
}
