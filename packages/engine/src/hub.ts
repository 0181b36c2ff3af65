import type { Redis } from 'ioredis';
import { TasklineError } from './errors.js';
import { taskKeys } from './keys.js';
import type { StoredEvent, TaskStore } from './store.js';

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
  /** The subscription is confirmed: a history read sent now misses nothing that is published. */
  live: boolean;
}

/**
 * Live tails of task event logs for any number of readers over one Redis connection. Every
 * script announces each event on the task's sharded channel; the hub subscribes once per task
 * with readers, replays history from Redis, then hands live events on in order. A gap (a
 * message missed across a reconnect) is filled from the stream, so readers never skip or repeat.
 */
export class EventHub {
  private readonly tasks = new Map<string, Tail>();
  private readonly subscriber: Redis;

  /**
   * Opens the hub's own subscriber connection beside the store's. Its ready check is off: after
   * a Redis restart ioredis would send INFO on a connection it already restored to subscriber
   * mode, which Redis refuses, and the hub would stay deaf.
   */
  constructor(private readonly store: TaskStore) {
    const name = store.redis.options.connectionName;
    const subscriber = store.redis.duplicate({
      connectionName: name ? `${name}-events` : undefined,
      enableReadyCheck: false,
      enableAutoPipelining: false,
    });
    subscriber.on('error', () => undefined); // reconnects on its own; readers catch up on 'ready'
    this.subscriber = subscriber;
    subscriber.on('smessage', (channel: string, message: string) => this.onMessage(channel, message));
    // After a reconnect the subscriptions are restored, but messages sent meanwhile are lost.
    subscriber.on('ready', () => {
      for (const [id, tail] of this.tasks) for (const l of tail.listeners) void this.catchUp(id, l);
    });
  }

  /** Closes the subscriber connection; readers get nothing more. */
  close(): void {
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
      created.subscribed = this.subscriber.ssubscribe(taskKeys(id).channel).then(() => (created.live = true));
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
      const reading = this.store.events(id, after);
      reading.catch(() => undefined); // awaited below, unless the subscription fails first
      await tail.subscribed;
      const history = await reading;
      if (history.expired)
        throw new TasklineError('event_history_expired', 'Events before this point are no longer kept.');
      for (const event of history.events) this.push(listener, event);
      const buffered = listener.pending ?? [];
      listener.pending = null;
      // Live events after a gap wait for the read below, which brings the gap and them in order.
      for (const event of buffered) this.push(listener, event);
      if (!live) void this.catchUp(id, listener);
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
    const nl1 = message.indexOf('\n');
    const nl2 = message.indexOf('\n', nl1 + 1);
    const nl3 = message.indexOf('\n', nl2 + 1);
    const event: StoredEvent = {
      seq: Number(message.slice(0, nl1)),
      writtenAt: Number(message.slice(nl1 + 1, nl2)),
      type: message.slice(nl2 + 1, nl3),
      data: message.slice(nl3 + 1),
    };
    for (const listener of tail.listeners) {
      if (listener.pending) listener.pending.push(event);
      else if (event.seq > listener.last + 1) void this.catchUp(id, listener);
      else this.push(listener, event);
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
    const events = await this.store.eventsAfter(id, listener.last).catch(() => [] as StoredEvent[]);
    for (const event of events) this.push(listener, event);
  }
}
