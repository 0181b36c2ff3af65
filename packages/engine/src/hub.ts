import type { Redis } from 'ioredis';
import { TasklineError } from './errors.js';
import { taskKeys } from './keys.js';
import type { StoredEvent } from './records.js';
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
   * nothing that is published. False from a lost connection until the hub subscribed again.
   */
  live: boolean;
}

/** How long a failed catch-up read waits before it is tried again (the reader would stall). */
const CATCH_UP_RETRY_MS = 500;

/**
 * Live tails of task event logs for any number of readers over one Redis connection. Every
 * script announces each event on the task's sharded channel; the hub subscribes once per task
 * with readers, replays history from Redis, then hands live events on in order. A gap (a
 * message missed across a reconnect) is filled from the stream, so readers never skip or repeat.
 */
export class EventHub {
  private readonly tasks = new Map<string, Tail>();
  private readonly subscriber: Redis;
  /** Counts the resubscriptions after lost connections: a reader attaching across one catches up. */
  private epoch = 0;
  /** Settles when the channels are subscribed again after a lost connection. */
  private back: Promise<void> = Promise.resolve();
  private settleBack: (() => void) | null = null;
  private closed = false;

  /**
   * Opens the hub's own subscriber connection beside the store's. Its ready check is off: after
   * a Redis restart ioredis would send INFO on a connection it already restored to subscriber
   * mode, which Redis refuses, and the hub would stay deaf. The hub subscribes again itself after
   * a reconnect (not ioredis's auto-resubscribe, which announces 'ready' before the channels are
   * subscribed): readers catch up only once the channels are live again, so an event published
   * between their catch-up read and the resubscription cannot fall between the two.
   */
  constructor(private readonly store: TaskStore) {
    const name = store.redis.options.connectionName;
    const subscriber = store.redis.duplicate({
      connectionName: name ? `${name}-events` : undefined,
      enableReadyCheck: false,
      enableAutoPipelining: false,
      autoResubscribe: false,
    });
    subscriber.on('error', () => undefined); // reconnects on its own; readers catch up after it
    this.subscriber = subscriber;
    subscriber.on('smessage', (channel: string, message: string) => this.onMessage(channel, message));
    // Messages published while the connection is down are lost: no tail is live until resubscribed.
    subscriber.on('close', () => this.lost());
    subscriber.on('ready', () => void this.resubscribe());
  }

  private lost(): void {
    if (this.closed || this.settleBack) return;
    this.back = new Promise<void>((resolve) => (this.settleBack = resolve));
    for (const tail of this.tasks.values()) {
      tail.live = false;
      tail.subscribed = this.back;
    }
  }

  /** After a reconnect: every channel subscribed again, then every reader catches up from the log. */
  private async resubscribe(): Promise<void> {
    if (!this.settleBack) return; // the first connection: subscriptions are made as readers come
    try {
      await Promise.all([...this.tasks.keys()].map((id) => this.subscriber.ssubscribe(taskKeys(id).channel)));
    } catch {
      return; // lost again: the next 'ready' tries again
    }
    this.epoch++;
    const settle = this.settleBack;
    this.settleBack = null;
    for (const tail of this.tasks.values()) {
      tail.live = true;
      tail.subscribed = Promise.resolve();
    }
    settle();
    for (const [id, tail] of this.tasks) for (const l of tail.listeners) void this.catchUp(id, l);
  }

  /** Closes the subscriber connection; readers get nothing more. */
  close(): void {
    this.closed = true;
    this.tasks.clear();
    this.subscriber.disconnect();
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
      const created: Tail = { listeners: new Set(), subscribed: Promise.resolve(), live: false };
      const epoch = this.epoch;
      // Confirmed on this connection only if no reconnect came in between (else resubscribe confirms it).
      created.subscribed = this.subscriber
        .ssubscribe(taskKeys(id).channel)
        .then(() => (created.live ||= epoch === this.epoch && !this.settleBack));
      tail = created;
      this.tasks.set(id, tail);
    }
    tail.listeners.add(listener);
    const close = () => {
      if (listener.closed) return;
      listener.closed = true;
      const current = this.tasks.get(id);
      current?.listeners.delete(listener);
      if (current?.listeners.size === 0) {
        this.tasks.delete(id);
        void this.subscriber.sunsubscribe(taskKeys(id).channel).catch(() => undefined);
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
      if (history.expired)
        throw new TasklineError('event_history_expired', 'Events before this point are no longer kept.');
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
