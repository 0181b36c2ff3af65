// The EventHub: live tails of task event logs for any number of readers on this process.
import { historyExpired } from './errors.js';
import { taskKeys } from './keys.js';
import type { StoredEvent } from './records.js';
import { ShardLinks, type Link } from './shards.js';
import type { TaskStore } from './store.js';

export interface Subscription {
  /** Sequence number of the last event delivered. */
  readonly last: number;
  close(): void;
}

interface Listener {
  last: number;
  /** Live events that arrived while the history was still being replayed. */
  pending: StoredEvent[] | null;
  deliver: (event: StoredEvent) => void;
  closed: boolean;
}

/** A task's readers on this process, and its channel subscription that every reader waits for. */
interface Tail {
  listeners: Set<Listener>;
  subscribed: Promise<unknown>;
  /**
   * The subscription is confirmed on the current connection: a history read sent now misses
   * nothing that is published. False from a lost connection (or a move to another shard) until
   * the hub subscribed again.
   */
  live: boolean;
  /** The connection it is subscribed on: its slot's owner on a cluster. */
  link: Link | null;
}

/** A link whose connection dropped: settles once its channels are subscribed again. */
interface Down {
  back: Promise<void>;
  settle: () => void;
}

/** How long a failed catch-up read waits before it is tried again (the reader would stall). */
const CATCH_UP_RETRY_MS = 500;
/** How long a channel whose move to another connection failed waits before it is tried again. */
const SUBSCRIBE_RETRY_MS = 500;

export interface EventHubOptions {
  /**
   * How often the hub reads each followed task's log after its readers' last event (default
   * 10 s): an announcement lost with nothing after it (a task's final event, published as a
   * failover dropped the subscriber connection) would otherwise leave its readers waiting for
   * good. One read per followed task per interval.
   */
  verifyMs?: number;
}
const VERIFY_MS = 10_000;

/**
 * Live tails of task event logs for any number of readers. Every script announces each event on
 * the task's sharded channel; the hub subscribes once per task with readers, replays history from
 * Redis, then hands live events on in order. A gap (a message missed across a reconnect) is filled
 * from the stream, so readers never skip or repeat. On one Redis it holds one subscriber
 * connection; on a Redis Cluster one per primary that owns a subscribed channel's slot, and it
 * moves channels to their new owner when a failover or a slot migration changes the slot table.
 */
export class EventHub {
  private readonly tasks = new Map<string, Tail>();
  private readonly links: ShardLinks;
  /** Counts resubscriptions (after lost connections, moves): a reader attaching across one catches up. */
  private epoch = 0;
  private readonly down = new Map<Link, Down>();
  private closed = false;
  private readonly verifier: NodeJS.Timeout;

  /**
   * Opens the hub's own subscriber connections beside the store's (see `ShardLinks`). The hub
   * subscribes again itself after a reconnect (not ioredis's auto-resubscribe, which announces
   * 'ready' before the channels are subscribed): readers catch up only once the channels are live
   * again, so an event published between their catch-up read and the resubscription cannot fall
   * between the two.
   */
  constructor(
    private readonly store: TaskStore,
    options: EventHubOptions = {},
  ) {
    this.links = new ShardLinks(store.redis, {
      message: (channel, message) => this.onMessage(channel, message),
      // Messages published while a connection is down are lost: none of its tails is live until resubscribed.
      lost: (link) => this.lost(link),
      back: (link) => void this.resubscribe(link),
      moved: () => this.rehome(),
    });
    this.verifier = setInterval(() => this.verify(), options.verifyMs ?? VERIFY_MS);
    this.verifier.unref();
  }

  private lost(link: Link): void {
    if (this.closed || this.down.has(link)) return;
    let settle!: () => void;
    const back = new Promise<void>((resolve) => (settle = resolve));
    this.down.set(link, { back, settle });
    for (const tail of this.tasks.values()) {
      if (tail.link !== link) continue;
      tail.live = false;
      tail.subscribed = back;
    }
  }

  /** After a reconnect: the link's channels subscribed again, then their readers catch up from the log. */
  private async resubscribe(link: Link): Promise<void> {
    const down = this.down.get(link);
    if (!down) return; // the first connection: subscriptions are made as readers come
    const mine = [...this.tasks].filter(([, tail]) => tail.link === link);
    try {
      await Promise.all(mine.map(([id]) => link.conn.ssubscribe(taskKeys(id).channel)));
    } catch (err) {
      // The node came back without these slots (a failover demoted it): the table is read again
      // and `rehome` moves its channels. Otherwise lost again: the next 'ready' tries again.
      if (isMoved(err)) this.links.refresh();
      return;
    }
    if (this.down.get(link) !== down) return;
    this.epoch++;
    this.down.delete(link);
    for (const [, tail] of mine) {
      if (tail.link !== link) continue;
      tail.live = true;
      tail.subscribed = Promise.resolve();
    }
    down.settle();
    for (const [id, tail] of mine) for (const l of tail.listeners) void this.catchUp(id, l);
  }

  /**
   * The cluster's slot table changed: every channel whose slot has another owner now is
   * subscribed there (and dropped where it was), and its readers catch up once it is live. A
   * link left without channels (a failed primary's) is closed.
   */
  private rehome(): void {
    if (this.closed) return;
    const left = new Set<Link>();
    for (const [id, tail] of this.tasks) {
      const channel = taskKeys(id).channel;
      if (!tail.link || this.links.ownerOf(channel) === tail.link.key) continue;
      left.add(tail.link);
      tail.link.conn.sunsubscribe(channel).catch(() => undefined);
      this.attach(id, tail, true);
    }
    for (const link of left) {
      if ([...this.tasks.values()].some((tail) => tail.link === link)) continue;
      this.down.get(link)?.settle();
      this.down.delete(link);
      this.links.release(link);
    }
  }

  /**
   * Subscribes a tail's channel on its slot owner's link. A first subscription is confirmed for
   * the readers that wait for it; a moved one also has every reader catch up, as after a reconnect.
   */
  private attach(id: string, tail: Tail, moved: boolean): void {
    const channel = taskKeys(id).channel;
    tail.live = false;
    tail.subscribed = this.links.ready().then((): Promise<unknown> | undefined => {
      if (this.tasks.get(id) !== tail) return;
      const link = this.links.linkFor(channel);
      tail.link = link;
      // A connection not ready (new, or back from a drop) subscribes this channel with its others
      // once ready (`resubscribe`). Sent sooner, while ioredis still checks the Redis (its INFO,
      // repeated while Redis loads its AOF; ioredis writes a subscription at once meanwhile), a
      // subscription puts the connection in subscriber mode: the next check is refused, and ioredis
      // fails every command in flight on it, this one too (a 500, not a 503).
      if (link.conn.status !== 'ready') {
        this.lost(link);
        return this.down.get(link)?.back;
      }
      const down = this.down.get(link);
      const epoch = this.epoch;
      const subscribing = link.conn.ssubscribe(channel).then(
        () => {
          // Confirmed on this connection only if no reconnect came in between (else resubscribe confirms it).
          if (this.tasks.get(id) !== tail || tail.link !== link || this.down.has(link)) return;
          if (!moved) {
            tail.live ||= epoch === this.epoch;
            return;
          }
          tail.live = true;
          this.epoch++;
          for (const l of tail.listeners) void this.catchUp(id, l);
        },
        (err: unknown) => {
          // A stale slot table: read it again, and `rehome` subscribes where the slot is now.
          if (isMoved(err)) return this.links.refresh();
          // The first subscription's readers are told (503); a moved one has none waiting, and
          // is tried again, or its readers would get nothing more.
          if (!moved) throw err;
          setTimeout(() => {
            if (this.tasks.get(id) === tail && tail.link === link && !tail.live) this.attach(id, tail, true);
          }, SUBSCRIBE_RETRY_MS).unref();
        },
      );
      return down ? Promise.all([subscribing, down.back]) : subscribing;
    });
    // Its readers await it; a failure with none left waiting must not end the process.
    tail.subscribed.catch(() => undefined);
  }

  /** Closes the subscriber connections; readers get nothing more. */
  close(): void {
    this.closed = true;
    clearInterval(this.verifier);
    this.tasks.clear();
    this.links.close();
  }

  /** Readers currently attached, for metrics. */
  get readers(): number {
    let n = 0;
    for (const tail of this.tasks.values()) n += tail.listeners.size;
    return n;
  }

  /**
   * Delivers every event after `after`, history first, then live, until closed. Throws
   * `event_history_expired` when part of what was asked for is no longer kept.
   */
  async subscribe(id: string, after: number, deliver: (event: StoredEvent) => void): Promise<Subscription> {
    const listener: Listener = { last: after, pending: [], deliver, closed: false };
    let tail = this.tasks.get(id);
    if (!tail) {
      tail = { listeners: new Set(), subscribed: Promise.resolve(), live: false, link: null };
      this.tasks.set(id, tail);
      this.attach(id, tail, false);
    }
    tail.listeners.add(listener);
    const close = () => {
      if (listener.closed) return;
      listener.closed = true;
      const current = this.tasks.get(id);
      current?.listeners.delete(listener);
      if (current?.listeners.size === 0) {
        this.tasks.delete(id);
        void current.link?.conn.sunsubscribe(taskKeys(id).channel).catch(() => undefined);
      }
    };
    try {
      // The history is read while the channel subscription is being made, not after it (one round
      // trip less before the first event). An event published between that read and the
      // subscription is in neither, so once the channel is live one more read picks it up.
      const live = tail.live;
      const epoch = this.epoch;
      const reading = this.store.events(id, after);
      reading.catch(() => undefined); // awaited below, unless the subscription fails first
      // A failed read answers at once; a lost subscriber connection is waited for.
      await Promise.all([tail.subscribed, reading]);
      const history = await reading;
      if (history.expired) throw historyExpired();
      for (const event of history.events) this.push(listener, event);
      const buffered = listener.pending ?? [];
      listener.pending = null;
      // Live events after a gap wait for the read below, which brings the gap and them in order.
      for (const event of buffered) this.push(listener, event);
      // Not live when the read was sent, or a reconnect came since: what was published meanwhile
      // reached no one, and the reconnect's catch-up skipped this reader while it replayed.
      if (!live || epoch !== this.epoch) void this.catchUp(id, listener);
    } catch (err) {
      close();
      throw err;
    }
    return {
      get last() {
        return listener.last;
      },
      close,
    };
  }

  private onMessage(channel: string, message: string): void {
    const id = channel.slice(channel.indexOf('{') + 1, channel.indexOf('}'));
    const tail = this.tasks.get(id);
    if (!tail) return;
    const events = parseAnnouncement(message);
    for (const listener of tail.listeners) {
      if (!events) void this.catchUp(id, listener);
      else if (listener.pending) listener.pending.push(...events);
      else if (events[0]!.seq > listener.last + 1) void this.catchUp(id, listener);
      else for (const event of events) this.push(listener, event);
    }
  }

  private push(listener: Listener, event: StoredEvent): void {
    if (listener.closed || event.seq !== listener.last + 1) return;
    listener.last = event.seq;
    listener.deliver(event);
  }

  /**
   * Each followed task's log read once after its readers' last event, live or not (see
   * `verifyMs`); readers still replaying their history are left to it.
   */
  private verify(): void {
    for (const [id, tail] of this.tasks) {
      const readers = [...tail.listeners].filter((l) => !l.pending && !l.closed);
      if (readers.length === 0) continue;
      const after = Math.min(...readers.map((l) => l.last));
      // A failed read is the next interval's to try again.
      void this.store.eventsAfter(id, after).then(
        (events) => {
          for (const l of readers) for (const event of events) this.push(l, event);
        },
        () => undefined,
      );
    }
  }

  private async catchUp(id: string, listener: Listener): Promise<void> {
    if (listener.pending || listener.closed) return;
    // Its history was checked when it attached: a plain read of what follows.
    let events: StoredEvent[];
    try {
      events = await this.store.eventsAfter(id, listener.last);
    } catch {
      // Redis is not answering: try again, or the reader would wait for an event already written.
      setTimeout(() => void this.catchUp(id, listener), CATCH_UP_RETRY_MS).unref();
      return;
    }
    for (const event of events) this.push(listener, event);
  }
}

/** Redis Cluster's answer when a node does not own a slot (any more). */
const isMoved = (err: unknown) => err instanceof Error && err.message.startsWith('MOVED');

/**
 * The events of one script's message (see `_emit.lua`): "<seq>\n<at>\n<type>\n<data>" for one,
 * "<first>-<last>\n<at>\n<type>\n<data>\n<type>\n<data>..." for several. Null when it does not
 * parse: the reader then reads the log instead.
 */
export function parseAnnouncement(message: string): StoredEvent[] | null {
  const nl1 = message.indexOf('\n');
  const nl2 = message.indexOf('\n', nl1 + 1);
  const head = message.slice(0, nl1);
  const writtenAt = Number(message.slice(nl1 + 1, nl2));
  const dash = head.indexOf('-');
  if (dash < 0) {
    const nl3 = message.indexOf('\n', nl2 + 1);
    const seq = Number(head);
    if (nl3 < 0 || !Number.isInteger(seq)) return null;
    return [{ seq, writtenAt, type: message.slice(nl2 + 1, nl3), data: message.slice(nl3 + 1) }];
  }
  const first = Number(head.slice(0, dash));
  const lines = message.slice(nl2 + 1).split('\n');
  if (!Number.isInteger(first) || lines.length !== 2 * (Number(head.slice(dash + 1)) - first + 1))
    return null;
  const events: StoredEvent[] = [];
  for (let i = 0; i < lines.length; i += 2)
    events.push({ seq: first + i / 2, writtenAt, type: lines[i]!, data: lines[i + 1]! });
  return events;
}
