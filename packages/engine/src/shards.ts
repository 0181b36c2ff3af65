// Subscriber connections for sharded channels, one per Redis or cluster primary.
import { Redis } from 'ioredis';
import { isCluster } from './redis.js';
import { keySlot } from './slots.js';

/**
 * One subscriber connection for sharded channels: to the one Redis, or to one cluster primary
 * (Redis Cluster serves a sharded channel only on the shard that owns its slot).
 */
export interface Link {
  /** `host:port` of its node; `''` for the one Redis. */
  readonly key: string;
  readonly conn: Redis;
}

export interface LinkEvents {
  message(channel: string, message: string): void;
  /** The link's connection dropped: what was published meanwhile reached no one. */
  lost(link: Link): void;
  /** The link's connection is back (not yet subscribed again). */
  back(link: Link): void;
  /** The cluster's slot table changed: channels may have another owner now. */
  moved(): void;
}

/** What an ioredis Cluster exposes of its slot table and node options. */
interface ClusterView {
  slots: string[][];
  options: { redisOptions?: Record<string, unknown> };
  refreshSlotsCache(callback?: () => void): void;
  on(event: 'refresh', listener: () => void): void;
  off(event: 'refresh', listener: () => void): void;
}

/**
 * The subscriber connections of one process: one to a single Redis, or one per cluster primary
 * that owns a subscribed channel's slot, opened as channels need them. On a cluster, a slot table
 * refresh (a failover, a slot migration: ioredis re-reads the table on MOVED, on a lost node and
 * every few seconds) is reported as `moved`, for the owner to move channels to their new node.
 * Each connection's ready check is off: after a restart ioredis would send INFO on a connection
 * already in subscriber mode, which Redis refuses; the owner subscribes again itself on `back`.
 */
export class ShardLinks {
  private readonly links = new Map<string, Link>();
  private readonly cluster: ClusterView | null;
  private readonly onRefresh = () => this.events.moved();
  private closed = false;

  constructor(
    private readonly redis: Redis,
    private readonly events: LinkEvents,
  ) {
    this.cluster = isCluster(redis) ? (redis as unknown as ClusterView) : null;
    this.cluster?.on('refresh', this.onRefresh);
    // One Redis: its one link opens with the hub. A cluster's open as channels need them.
    if (!this.cluster) this.links.set('', { key: '', conn: this.open('') });
  }

  /** The node that owns `channel`'s slot now (`''` for the one Redis, or while the table is unknown). */
  ownerOf(channel: string): string {
    return this.cluster?.slots[keySlot(channel)]?.[0] ?? '';
  }

  /** Resolves once the slot table is known (at once for one Redis). */
  async ready(): Promise<void> {
    if (this.cluster && this.cluster.slots.length === 0) await this.redis.ping();
  }

  /** The link to the node that owns `channel`, opened if need be (call after `ready`). */
  linkFor(channel: string): Link {
    const key = this.ownerOf(channel);
    let link = this.links.get(key);
    if (!link) {
      link = { key, conn: this.open(key) };
      this.links.set(key, link);
    }
    return link;
  }

  /** Closes the link to a node no channel needs any more. */
  release(link: Link): void {
    if (this.links.get(link.key) !== link) return;
    this.links.delete(link.key);
    link.conn.disconnect();
  }

  /** After a refused subscription (MOVED: the table is stale), the table is read again. */
  refresh(): void {
    this.cluster?.refreshSlotsCache();
  }

  close(): void {
    this.closed = true;
    this.cluster?.off('refresh', this.onRefresh);
    for (const link of this.links.values()) link.conn.disconnect();
    this.links.clear();
  }

  private open(key: string): Redis {
    const name =
      this.redis.options.connectionName ?? (this.cluster?.options.redisOptions?.connectionName as string);
    // With the ready check on: without it, ioredis declares a connection ready once its CLIENT
    // SETNAME is answered or failed, whichever connection that was, so a connect reset at once
    // (a refused moment of a network drop) left a dead connection 'ready' that never reconnected.
    // The check is safe here: with autoResubscribe off, a new connection is not in subscriber mode.
    const options = {
      connectionName: name ? `${name}-events` : undefined,
      enableAutoPipelining: false,
      autoResubscribe: false,
    };
    let conn: Redis;
    if (this.cluster) {
      const at = key.lastIndexOf(':');
      conn = new Redis({
        ...this.cluster.options.redisOptions,
        ...options,
        host: key.slice(0, at),
        port: Number(key.slice(at + 1)),
      });
    } else {
      conn = this.redis.duplicate(options);
    }
    conn.on('error', () => undefined); // reconnects on its own; readers catch up after it
    conn.on('smessage', (channel: string, message: string) => this.events.message(channel, message));
    const link = () => this.links.get(key);
    conn.on('close', () => {
      const current = link();
      if (!this.closed && current?.conn === conn) this.events.lost(current);
    });
    conn.on('ready', () => {
      const current = link();
      if (!this.closed && current?.conn === conn) this.events.back(current);
    });
    return conn;
  }
}
