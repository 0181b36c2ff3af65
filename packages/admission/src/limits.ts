/**
 * Per-tenant limits held in Redis, so they hold across every replica and survive a replica crash.
 *
 * - Request rate: a token bucket per tenant, updated by one script per request.
 * - Unfinished tasks: a ZSET of task ids per tenant (`tl:api:active:{tenant}`), scored by when
 *   each place was taken. A create first takes a place under the id its task will be written
 *   with, then counts; only when the count is over the cap (or the console reads the tenant's
 *   usage) are entries pruned against the task records (finished and expired tasks leave, and an
 *   id with no record once its place is older than a create can take), so no cleanup hook is
 *   needed when a task ends, no swap follows a create that used its place, and nothing is lost
 *   when a replica dies between steps. Racing creates can both be refused near the cap, never
 *   both admitted over it. Every place written renews the set's expiry (`unfinishedTtlMs`), so a
 *   tenant that stops creating leaves no key behind (see docs/clocks.md, "Keys with a bound").
 * - Open streams: a ZSET per tenant of stream ids scored by a lease that each heartbeat renews;
 *   a stream of a replica that died stops counting when its lease lapses.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { isTerminal, newId, taskStatuses, TasklineError } from '@taskline/engine';
import { loadLimitScripts, type LimitScripts } from './scripts.js';

/** Every key of the api's limits (`tl:api:*`); each is one hash slot, its tenant's or address's. */
export const limitKeys = {
  rate: (tenant: string) => `tl:api:rate:{${tenant}}`,
  // The key keeps its first name, so replicas of two releases count one set during an upgrade.
  unfinished: (tenant: string) => `tl:api:active:{${tenant}}`,
  streams: (tenant: string) => `tl:api:streams:{${tenant}}`,
  authFailures: (address: string) => `tl:api:auth-failures:{${address}}`,
};

/** How old a place without its task may get before it is taken for a crashed create's. */
const RESERVATION_MS = 60_000;

export interface LimitSettings {
  ratePerS: number;
  burst: number;
  maxUnfinishedTasks: number;
  maxStreams: number;
  /** Lease of an open-stream slot; streams renew it on every heartbeat. */
  streamLeaseMs: number;
  /**
   * How long a tenant's unfinished-task set outlives its last create (the api passes twice
   * `TASKLINE_INPUT_TIMEOUT_S`): past it, tasks still unfinished no longer count under the cap.
   */
  unfinishedTtlMs: number;
}

const rateLimited = (detail: string, retryAfterS: number) =>
  new TasklineError('rate_limited', detail, { retryAfterS: Math.max(1, retryAfterS) });

/** A held place under the tenant's unfinished-task cap. */
export interface TaskReservation {
  /** The id drawn for the task the place is for: a create that writes its task under it leaves the place as it is. */
  readonly taskId: string;
  /** Throws `rate_limited` (and frees the place) when the tenant is over its cap; asked once, however often called. */
  admit(): Promise<void>;
  /**
   * Writes the place to the AOF: a create's request holds it in memory only (token_bucket.lua),
   * and its task must not outlive it in a crash. Sent beside the create's own writes, so both
   * share an fsync rather than stand in a row; nothing to write for a place held otherwise, or
   * once settled.
   */
  persist(): Promise<void>;
  /**
   * Settles the place: kept for `taskId` itself (no write), swapped for another task's id (a
   * replayed create's), or freed (null); a later null does nothing, a task id still lands.
   */
  commit(taskId: string | null): Promise<void>;
}

/** A held slot under the tenant's open-stream cap (LMSP event streams and MCP listens alike). */
export interface StreamSlot {
  /** Extends the slot's lease; called on every heartbeat. */
  renew(): Promise<void>;
  release(): Promise<void>;
}

export class TenantLimits {
  private readonly scripts: LimitScripts;

  constructor(
    private readonly redis: Redis,
    readonly settings: LimitSettings,
  ) {
    this.scripts = loadLimitScripts(redis);
  }

  /** Takes one request from the tenant's bucket, or throws `rate_limited` with the wait. */
  async takeRequest(tenant: string): Promise<void> {
    await this.take(tenant, null);
  }

  /**
   * A create's request: takes one from the bucket and, in the same script, holds a place for one
   * more unfinished task. The cap is only checked by `admit`, so a create that fails validation
   * first still gets its own error; it must `commit(null)` to free the place.
   */
  async takeCreate(tenant: string): Promise<TaskReservation> {
    const key = limitKeys.unfinished(tenant);
    const taskId = newId('task');
    const count = await this.take(tenant, taskId);
    return this.reservation(key, taskId, count, { inMemory: true });
  }

  /**
   * Holds a place for one more unfinished task, without a request token (a create whose request
   * took none); as with `takeCreate`, `admit` checks the cap and `commit` settles the place.
   */
  async reserveTask(tenant: string): Promise<TaskReservation> {
    const key = limitKeys.unfinished(tenant);
    const taskId = newId('task');
    const reply = await this.redis
      .multi()
      .zadd(key, Date.now(), taskId)
      .pexpire(key, this.settings.unfinishedTtlMs)
      .zcard(key)
      .exec();
    return this.reservation(key, taskId, Number(reply?.[2]?.[1] ?? 0), { inMemory: false });
  }

  private async take(tenant: string, reservation: string | null): Promise<number> {
    const { ratePerS, burst } = this.settings;
    const args: (string | number)[] = [ratePerS, burst, Date.now()];
    if (reservation) args.push(reservation, this.settings.unfinishedTtlMs);
    const [waitMs, count] = await this.scripts.token_bucket(
      limitKeys.rate(tenant),
      limitKeys.unfinished(tenant),
      ...args,
    );
    if (waitMs > 0)
      throw rateLimited(
        'Too many requests for this tenant; retry after the indicated time.',
        Math.ceil(waitMs / 1000),
      );
    return count;
  }

  /** `inMemory`: the place was held by token_bucket.lua, which keeps it out of the AOF until `persist`. */
  private reservation(
    key: string,
    taskId: string,
    counted: number,
    { inMemory }: { inMemory: boolean },
  ): TaskReservation {
    let settled = false;
    let freed = false;
    const check = async () => {
      let count = counted;
      if (count > this.settings.maxUnfinishedTasks) count = (await this.prune(key)).length;
      if (count > this.settings.maxUnfinishedTasks) {
        settled = freed = true;
        await this.redis.zrem(key, taskId);
        throw rateLimited(`This tenant already has ${this.settings.maxUnfinishedTasks} unfinished tasks.`, 1);
      }
    };
    // Asked once: a surface that checks the cap before its create (MCP) and the create itself share the answer.
    let admitted: Promise<void> | undefined;
    return {
      taskId,
      admit: () => (admitted ??= check()),
      persist: async () => {
        if (!inMemory || settled) return;
        // The place leaves and comes back in one script: both writes reach the AOF (a ZADD of a
        // member already there, as it is in memory, would change nothing and be left out).
        await this.scripts.reservation_commit(key, taskId, taskId, Date.now(), this.settings.unfinishedTtlMs);
      },
      commit: async (written) => {
        // A caller that leaves frees the place (commit(null)) while its create may still be
        // writing the task: the task, once written, must take a place all the same.
        if (settled && written === null) return;
        const kept = written === taskId && !freed;
        settled = true;
        freed = written === null;
        if (!kept)
          await this.scripts.reservation_commit(
            key,
            taskId,
            written ?? '',
            Date.now(),
            this.settings.unfinishedTtlMs,
          );
      },
    };
  }

  /**
   * Drops the places of finished and expired tasks and of creates that died before their record;
   * returns the places left. (`r:` places are what releases before places took their task's id
   * held: they leave by age alone.)
   */
  private async prune(key: string): Promise<string[]> {
    const members = await this.redis.zrange(key, 0, -1, 'WITHSCORES');
    const stale = Date.now() - RESERVATION_MS;
    const ids: string[] = [];
    const takenAt: number[] = [];
    const gone: string[] = [];
    for (let i = 0; i < members.length; i += 2) {
      const member = members[i]!;
      const at = Number(members[i + 1]);
      if (!member.startsWith('r:')) {
        ids.push(member);
        takenAt.push(at);
      } else if (at < stale) gone.push(member);
    }
    // An expired task is gone from Redis (its own clock): no deadline compared with ours. An id
    // without a record is a create still writing, until its place is too old for that.
    const states = await taskStatuses(this.redis, ids);
    ids.forEach((id, i) => {
      const status = states[i];
      if (status ? isTerminal(status) : takenAt[i]! < stale) gone.push(id);
    });
    if (gone.length > 0) await this.redis.zrem(key, ...gone);
    const dropped = new Set(gone);
    return members.filter((m, i) => i % 2 === 0 && !dropped.has(m));
  }

  /**
   * What each tenant uses of its limits now, for the operator console: unfinished tasks and open
   * streams as the caps count them, and the request tokens left in its bucket. The unfinished-task
   * set is pruned here as a create over the cap prunes it (ended tasks and dead creates leave), or
   * a tenant whose creates stayed under the cap would show every task it ever ended there: the
   * read costs one status read per place, which the console's counts by status then no longer
   * spend on ended ones, and creates pay nothing for it. The places left come back as read (task
   * ids and creates in flight), and the console counts statuses from them.
   */
  async usage(
    tenants: string[],
  ): Promise<
    Map<string, { unfinishedTasks: number; unfinished: string[]; streams: number; rateTokens: number }>
  > {
    const now = Date.now();
    // Separate commands (one write all the same, auto-pipelined): each tenant is its own slot, and
    // a pipeline on a Redis Cluster must stay on one node.
    const rows = await Promise.all(
      tenants.map((t) =>
        Promise.all([
          this.prune(limitKeys.unfinished(t)),
          // A lapsed lease (a replica that died) no longer counts: the next open drops it.
          this.redis.zcount(limitKeys.streams(t), `(${now}`, '+inf'),
          this.redis.hmget(limitKeys.rate(t), 'tokens', 'ts'),
        ]),
      ),
    );
    const { ratePerS, burst } = this.settings;
    return new Map(
      tenants.map((t, i) => {
        const [unfinished, streams, [tokens, ts]] = rows[i]!;
        // The bucket refills between requests; its stored count is as of its last request.
        const left =
          tokens == null ? burst : Math.min(burst, Number(tokens) + ((now - Number(ts)) / 1000) * ratePerS);
        return [
          t,
          {
            unfinishedTasks: unfinished.length,
            unfinished,
            streams,
            rateTokens: Math.floor(left),
          },
        ];
      }),
    );
  }

  /** Opens a stream slot; `renew` on every heartbeat, `release` when the stream ends. */
  async openStream(tenant: string): Promise<StreamSlot> {
    const key = limitKeys.streams(tenant);
    const id = randomUUID();
    const lease = () => Date.now() + this.settings.streamLeaseMs;
    const ok = await this.scripts.stream_slot(key, Date.now(), id, lease(), this.settings.maxStreams);
    if (Number(ok) !== 1)
      throw rateLimited(`This tenant already has ${this.settings.maxStreams} open streams.`, 1);
    return {
      // Added back if it went (stream_renew.lua); `release` comes after the last renewal, on one connection.
      renew: async () => {
        await this.scripts.stream_renew(key, id, lease(), this.settings.streamLeaseMs);
      },
      release: async () => {
        await this.scripts.stream_release(key, id);
      },
    };
  }
}
