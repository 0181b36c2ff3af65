/**
 * What the console and the scheduler's metrics read of the scheduler's index (`{sched}`, see
 * ./keys.ts), and the worker registry the leader writes for them.
 */
import type { Redis } from 'ioredis';
import { schedulerKeys } from './keys.js';

export interface WorkerSnapshot {
  scheduler: string;
  at: number;
  workers: {
    workerId: string;
    models: { model: string; slots: number; free: number }[];
    draining: boolean;
    lastSeen: number;
    /** Leases the worker renewed since it started (its heartbeat's count); absent from older schedulers. */
    leaseRenewals?: number;
  }[];
}

/** The leader scheduler publishes what its control plane knows of workers (they report only to it). */
export async function writeWorkerSnapshot(redis: Redis, snapshot: WorkerSnapshot, ttlMs: number) {
  await redis.set(schedulerKeys.workers, JSON.stringify(snapshot), 'PX', ttlMs);
}

/** One tenant's ready tasks on one model: how many, and the creation time of the oldest. */
export interface ReadyBacklog {
  model: string;
  tenant: string;
  depth: number;
  oldestAt: number;
}

/** The whole ready index, tenant by model (what queue-depth metrics and the console show). */
export async function readyBacklog(redis: Redis): Promise<ReadyBacklog[]> {
  const models = await redis.smembers(schedulerKeys.models);
  const tenantsOf = await Promise.all(models.map((m) => redis.smembers(schedulerKeys.tenants(m))));
  const pairs = models.flatMap((model, i) => tenantsOf[i]!.map((tenant) => ({ model, tenant })));
  // Separate commands, not a pipeline: auto-pipelining sends them in one write all the same, and
  // on a Redis Cluster a pipeline must stay within one node.
  const rows = await Promise.all(
    pairs.map(({ model, tenant }) =>
      Promise.all([
        redis.zcard(schedulerKeys.ready(tenant, model)),
        redis.zrange(schedulerKeys.ready(tenant, model), 0, 0, 'WITHSCORES'),
      ]),
    ),
  );
  const out: ReadyBacklog[] = [];
  pairs.forEach(({ model, tenant }, i) => {
    const depth = rows[i]![0];
    const [, oldest] = rows[i]![1];
    if (depth > 0 && oldest !== undefined) out.push({ model, tenant, depth, oldestAt: Number(oldest) });
  });
  return out;
}

/** The leader's last worker registry, or null when none is fresh. */
export async function readWorkerSnapshot(redis: Redis): Promise<WorkerSnapshot | null> {
  const raw = await redis.get(schedulerKeys.workers);
  return raw ? (JSON.parse(raw) as WorkerSnapshot) : null;
}

/** The scheduler leader's control address and what is left of its lease, or null when no replica leads. */
export async function leaderLease(redis: Redis): Promise<{ address: string; ttlMs: number } | null> {
  const [value, ttl] = await Promise.all([redis.get(schedulerKeys.leader), redis.pttl(schedulerKeys.leader)]);
  return value ? { address: leaderAddress(value), ttlMs: ttl } : null;
}

/** The control address in a leader lease's value (`<token> <address>`). */
export const leaderAddress = (value: string): string => value.slice(value.indexOf(' ') + 1);
