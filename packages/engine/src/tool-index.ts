/**
 * The MCP tool-task index's writes (`toolTaskIndex`, what 2025-11-25 `tasks/list` pages through):
 * the entry of a new tool task, and the retention sweep's bound and expiry, which never drop a
 * task `tasks/get` still serves (MCP 2025-11-25 "Tasks", tasks/list). Tool tasks only: an LMSP
 * create or end writes nothing here.
 */
import type { Redis } from 'ioredis';
import { toolTaskIndex, toolTaskOpen, toolTaskTenants } from './keys.js';
import { taskStatuses } from './lookups.js';
import { isTerminal } from './states.js';

/** What the retention sweep keeps of a tenant's index (the operator index's and this one's). */
export interface IndexBounds {
  /** Newest entries kept per tenant. */
  max: number;
  /** The tenant's index expires this long after the sweep that last visited it (the task retention). */
  retentionMs: number;
}

/** An entry whose task is not written this long after it was indexed belongs to a failed create. */
const CREATE_GRACE_MS = 60_000;
/** Entries past the bound whose task one sweep checks at most, oldest first: a bounded cost. */
const PAST_BOUND_READS = 1000;
const createdAtOf = (member: string) => Number(member.slice(0, 15));
const idOf = (member: string) => member.slice(16);

/**
 * Indexes a tool task before it is written (`member`: `<createdAt, 15 digits>:<id>`): in the
 * tenant's list, and among its tool tasks that may not have ended, in that order, so every listed
 * entry is known to the sweep until it ends.
 */
export async function indexToolTask(redis: Redis, tenant: string, member: string): Promise<void> {
  await Promise.all([
    redis.zadd(toolTaskOpen(tenant), 0, member),
    redis.zadd(toolTaskIndex(tenant), 0, member),
  ]);
}

/**
 * The sweep of the tool-task indexes of `creators` (tenants that created since the last sweep)
 * and of every tenant whose tool tasks had not all ended at the last one; returns the tenants it
 * visited. Each keeps its newest `max` entries and, past them, every task that still exists (it
 * drops at most PAST_BOUND_READS entries of expired tasks a sweep, the oldest; a listing drops
 * those it meets), puts back every task that has not ended, and expires `retentionMs` after the
 * sweep, which renews it while a task is unfinished: the index outlives its last unfinished task,
 * and so every ended one, by about a retention.
 */
export async function sweepToolTaskIndexes(
  redis: Redis,
  creators: readonly string[],
  now: number,
  o: IndexBounds,
): Promise<string[]> {
  const tenants = [...new Set([...creators, ...(await redis.smembers(toolTaskTenants))])];
  await Promise.all(tenants.map((tenant) => sweepTenant(redis, tenant, now, o)));
  return tenants;
}

async function sweepTenant(redis: Redis, tenant: string, now: number, o: IndexBounds) {
  const [index, open] = [toolTaskIndex(tenant), toolTaskOpen(tenant)];
  const members = await redis.zrange(open, 0, -1);
  const statuses = await taskStatuses(redis, members.map(idOf));
  const unfinished = members.filter((m, i) => {
    const status = statuses[i];
    return status ? !isTerminal(status) : createdAtOf(m) > now - CREATE_GRACE_MS;
  });
  const kept = new Set(unfinished);
  const ended = members.filter((m) => !kept.has(m));
  // Past the bound, only entries whose task is gone: `tasks/get` serves an ended task until it
  // expires, and MCP 2025-11-25 (Tasks, Task Listing) wants every task it serves listed.
  const past = Math.min((await redis.zcard(index)) - o.max, PAST_BOUND_READS);
  const oldest = past > 0 ? await redis.zrange(index, 0, past - 1) : [];
  const oldStatuses = await taskStatuses(redis, oldest.map(idOf));
  const gone = oldest.filter((m, i) => !oldStatuses[i] && createdAtOf(m) <= now - CREATE_GRACE_MS);
  // One transaction (both keys in the tenant's slot): a listing never sees the entries dropped
  // without the unfinished ones put back.
  const tx = redis.multi();
  if (ended.length > 0) tx.zrem(open, ...ended);
  if (gone.length > 0) tx.zrem(index, ...gone);
  if (unfinished.length > 0) tx.zadd(index, ...unfinished.flatMap((m) => [0, m]));
  tx.pexpire(index, o.retentionMs).pexpire(open, o.retentionMs);
  await Promise.all([
    tx.exec(),
    unfinished.length > 0 ? redis.sadd(toolTaskTenants, tenant) : redis.srem(toolTaskTenants, tenant),
  ]);
}
