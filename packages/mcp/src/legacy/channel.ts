// One Redis channel per replica for the 2025-era requests it holds.
import type { TaskStore } from '@taskline/engine';

type Redis = TaskStore['redis'];

/** How often held keys are handed to `resync`. */
const RESYNC_MS = 5000;

/**
 * One Redis channel a replica listens on for the requests it holds, whichever replica the news
 * lands on: a message is a key, and the waiter held under it here, if any, is called. One
 * subscription per replica and channel, made by the first waiter, however many wait; a replica
 * holding nothing a message names ignores it. Plain PUBLISH and SUBSCRIBE, as the scheduler's
 * wake: a Redis Cluster carries the message to every node.
 *
 * A message published before the subscription stands, or while it is remade after a lost
 * connection, is lost: `resync`, given, is called with every key held once the subscription
 * stands and then every `RESYNC_MS` while any is held, for waiters whose news is also kept in
 * Redis to look for it. A Redis Cluster client moves its subscription to another node without a
 * word, so the clock, not a reconnect event, is what bounds how late such news comes.
 */
export class ReplicaChannel {
  private readonly waiters = new Map<string, () => void>();
  private subscribed: Promise<unknown> | null = null;

  constructor(
    private readonly redis: Redis,
    private readonly channel: string,
    private readonly resync?: (keys: string[]) => void,
  ) {}

  /** Holds `key` until the returned release: a message naming it calls `waiter`. */
  hold(key: string, waiter: () => void): () => void {
    this.waiters.set(key, waiter);
    this.subscribed ??= this.subscribe().catch(() => {
      this.subscribed = null; // the next hold tries again
    });
    return () => {
      if (this.waiters.get(key) === waiter) this.waiters.delete(key);
    };
  }

  /** Calls the waiter held under `key` on this replica, if there is one: whether there was. */
  tellHere(key: string): boolean {
    const waiter = this.waiters.get(key);
    waiter?.();
    return waiter !== undefined;
  }

  /** Tells every replica's holder of `key`. */
  async publish(key: string): Promise<void> {
    await this.redis.publish(this.channel, key);
  }

  private async subscribe(): Promise<void> {
    // No retry limit: ioredis subscribes again on its own after a reconnect (see listenForOffers).
    const sub = this.redis.duplicate({ enableAutoPipelining: false, maxRetriesPerRequest: null });
    sub.on('error', () => undefined); // reconnects on its own; the main connection logs the outage
    sub.on('message', (_channel: string, key: string) => this.waiters.get(key)?.());
    // It lives as long as the connection it came from: the api closes that one when it stops,
    // and an open subscriber would keep the process from exiting.
    this.redis.once('end', () => sub.disconnect());
    try {
      await sub.subscribe(this.channel);
    } catch (err) {
      sub.disconnect();
      throw err;
    }
    if (!this.resync) return;
    this.resyncHeld();
    const clock = setInterval(() => this.resyncHeld(), RESYNC_MS);
    clock.unref();
    this.redis.once('end', () => clearInterval(clock));
  }

  private resyncHeld(): void {
    if (this.waiters.size) this.resync?.([...this.waiters.keys()]);
  }
}
