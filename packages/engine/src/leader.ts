// Scheduler leadership through one Redis key, its token fencing dispatch.
import type { Redis } from 'ioredis';
import { randomUUID } from 'node:crypto';
import { schedulerKeys } from './keys.js';
import { loadSchedulerScripts } from './scripts.js';

const LEADER_KEY = schedulerKeys.leader;

/**
 * Leadership through one Redis key: `SET NX PX` takes it, a Lua renew extends it only for the
 * token that holds it. The value is `<token> <control address>`, so standbys can point workers
 * at the leader; the token also fences the dispatch script, so a paused ex-leader cannot dispatch.
 */
export class Leadership {
  readonly token: string;
  private leading = false;
  private leaseUntil = 0;
  private readonly scripts: ReturnType<typeof loadSchedulerScripts>;

  constructor(
    private readonly redis: Redis,
    readonly address: string,
    private readonly leaseMs: number,
  ) {
    this.token = `${randomUUID()} ${address}`;
    this.scripts = loadSchedulerScripts(redis);
  }

  /** True while this replica holds the lease, by its own clock (it stops before the key expires). */
  isLeader(): boolean {
    return this.leading && Date.now() < this.leaseUntil;
  }

  /**
   * Takes or renews the lease; returns whether this replica leads now (isLeader): an answer that
   * came back after the lease it renewed had run out (Redis stalled meanwhile) does not lead yet.
   */
  async tick(): Promise<boolean> {
    const started = Date.now();
    let held = this.leading && (await this.scripts.leader_renew(LEADER_KEY, this.token, this.leaseMs)) === 1;
    if (!held) held = (await this.redis.set(LEADER_KEY, this.token, 'PX', this.leaseMs, 'NX')) === 'OK';
    this.leading = held;
    // Counted from before the call, so our view of the lease never outlives the key.
    this.leaseUntil = held ? started + this.leaseMs : 0;
    return this.isLeader();
  }

  async leaderAddr(): Promise<string | null> {
    const value = await this.redis.get(LEADER_KEY);
    return value ? value.slice(value.indexOf(' ') + 1) : null;
  }

  async release(): Promise<void> {
    this.leading = false;
    await this.scripts.leader_release(LEADER_KEY, this.token);
  }
}
