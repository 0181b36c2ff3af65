/**
 * The operations on the scheduler's index (`{sched}`, its invariants in ./keys.ts): the only way
 * the rest of the engine reads or writes it, each named for the step of a task's life it serves.
 */
import type { Redis } from 'ioredis';
import { queueTenant } from '../keys.js';
import { check, type Offer, type TaskRecord } from '../records.js';
import { nodeOf, serverTime } from '../redis.js';
import { loadScripts, type ScriptReply, type Scripts } from '../scripts.js';
import { handedOver } from './dispatch.js';
import { offeredState, schedulerKeys } from './keys.js';

/** The tenant and parent a task is filed under (see queueTenant). */
type Owner = Pick<TaskRecord, 'tenant' | 'parent'>;

/** enqueue.lua's reply codes. */
const ENQUEUED = ['held', 'offered', 'dispatched'] as const;
/** What an offer came to: held by a newer offer or dispatch, offered, or dispatched on a lent slot. */
type Enqueued = (typeof ENQUEUED)[number];

/** Entries a sweep found due, with the Redis clock (ms) it read them by. */
export interface Due {
  now: number;
  due: string[];
}

/** One place in a tenant's running set, as a sweep read it. */
export interface RunningPlace {
  /** The index name (`queueTenant`) the place is filed under. */
  tenant: string;
  id: string;
  score: string;
}

/** How a claim's lease entry (`leaseBeforeClaim`) came out, for `claimRefused`. */
export interface ClaimEntry {
  added: boolean;
  deadline: number;
  attempt: string;
  lease: string;
}

export class SchedIndex {
  /** A key of the index's slot: where `WAIT` (ReplicaAck) is routed for the index's writes. */
  readonly slotKey = schedulerKeys.intake;
  private readonly scripts: Scripts;

  constructor(
    private readonly redis: Redis,
    scripts?: Scripts,
  ) {
    this.scripts = scripts ?? loadScripts(redis);
  }

  /** Journals a create or an answer (`intake`) before its script runs. */
  journal(id: string, at: number): Promise<number> {
    return this.redis.zadd(schedulerKeys.intake, at, id);
  }

  /** Drops a journal entry: its task is known queued or not to be queued. */
  unjournal(id: string): Promise<number> {
    return this.redis.zrem(schedulerKeys.intake, id);
  }

  /** Journal entries older than `before` (ms), oldest first. */
  dueJournal(before: number, limit: number): Promise<string[]> {
    return this.redis.zrangebyscore(schedulerKeys.intake, '-inf', before, 'LIMIT', 0, limit);
  }

  /** Drops the journal entry the reconciler read, unless an answer wrote it again since. */
  unjournalAsRead(id: string, before: number): Promise<ScriptReply> {
    return this.scripts.lease_unindex(schedulerKeys.intake, id, before);
  }

  /**
   * Offers a queued task for dispatch (enqueue.lua; see the store's `enqueue` for `keepJournal`
   * and `placed`). False when a newer offer or dispatch holds the task.
   */
  async offer(task: Offer, keepJournal: boolean, placed: number): Promise<boolean> {
    return (await this.runEnqueue(task, keepJournal, placed, false)) === 'offered';
  }

  /**
   * A fresh create's offer, from a caller that queues jobs itself: `dispatched` when it took a
   * slot the leader lent (lend.lua; the caller queues the task's job, then `handedOver`), else as
   * `offer` keeping the journal entry (the create drops it once its record is known written).
   */
  offerOrTake(task: Offer): Promise<Enqueued> {
    return this.runEnqueue(task, true, task.attempt, true);
  }

  private async runEnqueue(
    task: Offer,
    keepJournal: boolean,
    placed: number,
    mayTake: boolean,
  ): Promise<Enqueued> {
    const tenant = queueTenant(task);
    const reply = await this.scripts.enqueue(
      schedulerKeys.ready(tenant, task.model),
      schedulerKeys.active(tenant),
      schedulerKeys.tenants(task.model),
      schedulerKeys.models,
      schedulerKeys.intake,
      schedulerKeys.offered,
      schedulerKeys.loans,
      schedulerKeys.inflight,
      schedulerKeys.leader,
      task.id,
      task.createdAt,
      tenant,
      task.model,
      schedulerKeys.wake,
      keepJournal ? '0' : '1',
      offeredState(task),
      placed,
      mayTake ? '1' : '0',
    );
    if (Array.isArray(reply)) check(task.id, reply);
    return ENQUEUED[Number(reply)] ?? 'held';
  }

  /** A task cancelled before any worker claimed it: off the queue, out of the running cap, unparked. */
  async dropCancelled(task: Pick<TaskRecord, 'id' | 'tenant' | 'parent' | 'model'>): Promise<void> {
    await this.redis
      .multi()
      .zrem(schedulerKeys.ready(queueTenant(task), task.model), task.id)
      .hdel(schedulerKeys.offered, task.id)
      .zrem(schedulerKeys.active(queueTenant(task)), task.id)
      .zrem(schedulerKeys.parked, task.id)
      .exec();
  }

  /** A claim's lease entry, written before the claim where the task has none (`NX`, Redis's clock). */
  leaseBeforeClaim(id: string, leaseMs: number): Promise<ScriptReply> {
    return this.scripts.lease_index(schedulerKeys.leases, leaseMs, 'NX', id);
  }

  /** Indexes a lease at the deadline its script stamped by Redis's clock. */
  leaseUntil(id: string, deadline: number): Promise<number> {
    return this.redis.zadd(schedulerKeys.leases, deadline, id);
  }

  /** Takes back what a refused claim's entry left (see `leases` and `active` in ./keys.ts). */
  async claimRefused(id: string, refusal: string, owner: Owner, entry: ClaimEntry): Promise<void> {
    if (refusal === 'missing') await this.redis.zrem(schedulerKeys.leases, id);
    else if (refusal === 'terminal') {
      // No attempt can hold an entry any more; and an ended task's place in its running set is one
      // dispatch gave a job of an offer that landed after the end (a cancel between a requeue and
      // its offer).
      const running = schedulerKeys.active(queueTenant(owner));
      await this.redis.multi().zrem(schedulerKeys.leases, id).zrem(running, id).exec();
    } else if ((refusal === 'stale' || refusal === 'illegal') && entry.added) {
      // Refused for a task that goes on: the entry written here is taken back (claim_unindex.lua).
      const running = schedulerKeys.active(queueTenant(owner));
      await this.scripts.claim_unindex(
        schedulerKeys.leases,
        running,
        id,
        entry.deadline,
        entry.attempt,
        entry.lease,
      );
    }
  }

  /** Lease entries lapsed by Redis's clock, the clock that scored them. */
  dueLeases(limit: number): Promise<Due> {
    return this.due(schedulerKeys.leases, limit);
  }

  /** Drops a lease entry a sweep read at `now`, unless renewed since. */
  unleaseAsRead(id: string, now: number): Promise<ScriptReply> {
    return this.scripts.lease_unindex(schedulerKeys.leases, id, now);
  }

  /** Writes a parked entry before the park; resolves to the entry it replaced (null for none). */
  async parkBeforeAsk(id: string, deadline: number): Promise<string | null> {
    const [replaced] = await Promise.all([
      this.redis.zscore(schedulerKeys.parked, id),
      this.redis.zadd(schedulerKeys.parked, deadline, id),
    ]);
    return replaced;
  }

  /** An ask refused after `parkBeforeAsk`: its entry back as it was, only if still its own. */
  parkRefused(id: string, deadline: number, replaced: string | null): Promise<ScriptReply> {
    return this.scripts.lease_unindex(
      schedulerKeys.parked,
      id,
      deadline,
      ...(replaced === null ? [] : [replaced]),
    );
  }

  /** Parked: the asking attempt's lease entry and running place go (park_unindex.lua). */
  releaseParked(task: Owner & { id: string }, attempt: number): Promise<ScriptReply> {
    return this.scripts.park_unindex(
      schedulerKeys.leases,
      schedulerKeys.active(queueTenant(task)),
      task.id,
      attempt,
    );
  }

  /** Answered: no deadline applies any more. */
  unpark(id: string): Promise<number> {
    return this.redis.zrem(schedulerKeys.parked, id);
  }

  /** Parked tasks whose input deadline (this process's clock, as written) is at or before `now`. */
  dueParked(now: number, limit: number): Promise<string[]> {
    return this.redis.zrangebyscore(schedulerKeys.parked, '-inf', now, 'LIMIT', 0, limit);
  }

  /** Drops the parked entry a sweep read at `now`; a task parked again since keeps its later one. */
  unparkAsRead(id: string, now: number): Promise<ScriptReply> {
    return this.scripts.lease_unindex(schedulerKeys.parked, id, now);
  }

  /** How many tasks wait for their caller's input. */
  parkedCount(): Promise<number> {
    return this.redis.zcard(schedulerKeys.parked);
  }

  /** Leases (or renews, `GT`) held calls for `leaseMs` by Redis's clock. */
  holdCalls(leaseMs: number, ids: string[]): Promise<ScriptReply> {
    return this.scripts.lease_index(schedulerKeys.held, leaseMs, 'GT', ...ids);
  }

  /** A held call ended. */
  releaseCall(id: string): Promise<number> {
    return this.redis.zrem(schedulerKeys.held, id);
  }

  /** Held calls whose lease lapsed by Redis's clock. */
  dueHeldCalls(limit: number): Promise<Due> {
    return this.due(schedulerKeys.held, limit);
  }

  /** Drops a held call's entry a sweep read at `now`, unless its replica renewed it since. */
  unholdAsRead(id: string, now: number): Promise<ScriptReply> {
    return this.scripts.lease_unindex(schedulerKeys.held, id, now);
  }

  /** Picks older than `before` (ms) whose job is not known queued. */
  staleInflight(before: number, limit: number): Promise<string[]> {
    return this.redis.zrangebyscore(schedulerKeys.inflight, '-inf', before, 'LIMIT', 0, limit);
  }

  /** Drops the in-flight entry of a pick the reconciler handled. */
  pickHandled(id: string): Promise<void> {
    return handedOver(this.redis, [id]);
  }

  /** Every place of every running set, in one sweep. */
  async runningPlaces(): Promise<RunningPlace[]> {
    const prefix = schedulerKeys.active('');
    const places: RunningPlace[] = [];
    for (const key of await this.scan(`${prefix}*`)) {
      const raw = await this.redis.zrange(key, 0, -1, 'WITHSCORES');
      for (let i = 0; i < raw.length; i += 2)
        places.push({ tenant: key.slice(prefix.length), id: raw[i]!, score: raw[i + 1]! });
    }
    return places;
  }

  /** Drops a running place only while it is scored as read (place_unindex.lua); 1 if dropped. */
  async dropPlaceAsRead(place: RunningPlace): Promise<number> {
    return Number(
      await this.scripts.place_unindex(schedulerKeys.active(place.tenant), place.id, place.score),
    );
  }

  /**
   * Whether a queued task waits for dispatch: ready, or picked by a dispatch still queueing its
   * job. In this order: a pick after the ready read is in flight until its job is queued.
   */
  async waitsForDispatch(place: RunningPlace, model: string): Promise<boolean> {
    if ((await this.redis.zscore(schedulerKeys.ready(place.tenant, model), place.id)) !== null) return true;
    return (await this.redis.zscore(schedulerKeys.inflight, place.id)) !== null;
  }

  /** The task's place in its tenant's running set (the attempt scored), or null for none. */
  placeOf(task: Owner & { id: string }): Promise<string | null> {
    return this.redis.zscore(schedulerKeys.active(queueTenant(task)), task.id);
  }

  /** Dispatched, unfinished tasks per tenant (the running sets). */
  async runningCounts(tenants: string[]): Promise<Map<string, number>> {
    const rows = await Promise.all(tenants.map((t) => this.redis.zcard(schedulerKeys.active(t))));
    return new Map(tenants.map((t, i) => [t, rows[i]!]));
  }

  private async due(key: string, limit: number): Promise<Due> {
    const now = await serverTime(this.redis, key);
    return { now, due: await this.redis.zrangebyscore(key, '-inf', now, 'LIMIT', 0, limit) };
  }

  private async scan(pattern: string): Promise<string[]> {
    const keys: string[] = [];
    let cursor = '0';
    do {
      // On a cluster, SCAN reads one node: the one that owns the `{sched}` slot of every key it looks for.
      const [next, batch] = await nodeOf(this.redis, pattern).scan(cursor, 'MATCH', pattern, 'COUNT', 500);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== '0');
    return keys;
  }
}
