// The console's live views: snapshot feeds read on an interval while followed, served as SSE.
import type { Request, Response } from 'express';
import { EXPIRED_EVENT } from '@taskline/auth';
import { SseStream } from '@taskline/sse';
import { TasklineError } from '@taskline/engine';

/** What the api lends the console's live views: its stream cap, its shutdown and its SSE settings. */
export interface LiveStreams {
  /** Takes an open-stream slot under `name`'s cap (`rate_limited` when full); renewed on heartbeats. */
  openStream(name: string): Promise<{ renew(): Promise<void>; release(): Promise<void> }>;
  /** Holds the stream among the process's resumable ones: shutdown ends it with a `retry:` hint. */
  register(stream: { kind: 'events'; end(retryMs?: number): void }): () => void;
  heartbeatMs: number;
  retryMs: number;
  /** A reader this far behind is cut off with a `retry:` hint (it resumes with Last-Event-ID). */
  maxBufferBytes: number;
  /** Told +1 and -1 as streams open and close (the api's open-stream gauge). */
  opened?(delta: number): void;
}

/** One state of a live view, rendered once as its SSE frame whatever the number of readers. */
interface Snapshot {
  id: number;
  frame: string;
}

/** How far ahead of this replica's clock a Last-Event-ID may be (another replica's clock): beyond it, none was sent. */
const CLOCK_SKEW_MS = 60_000;

/**
 * A live view's state, read every `intervalMs` while someone follows it, and only then: one read
 * per process per interval however many operators watch, so a stream costs one write per
 * snapshot. Ids are the snapshot's time (ms), strictly increasing in a process.
 */
export class SnapshotFeed {
  private readonly listeners = new Set<(s: Snapshot) => void>();
  private latest: Snapshot | null = null;
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | null = null;

  constructor(
    private readonly event: string,
    private readonly read: () => Promise<{ at: number }>,
    private readonly intervalMs: number,
    /** Called when its last reader leaves. */
    private readonly onIdle?: () => void,
  ) {}

  /** Calls `fn` with each new snapshot (the latest one first, unless it is `after` itself). */
  async subscribe(after: number, fn: (s: Snapshot) => void): Promise<() => void> {
    this.listeners.add(fn);
    if (!this.timer) this.schedule();
    // A new reader gets the state now, not an interval later: read it unless one is fresh.
    if (!this.latest || Date.now() - this.latest.id >= this.intervalMs) await this.tick();
    else if (this.latest.id !== after) fn(this.latest);
    return () => {
      this.listeners.delete(fn);
      if (this.listeners.size === 0) {
        clearTimeout(this.timer);
        this.timer = undefined;
        this.onIdle?.();
      }
    };
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      void this.tick().finally(() => {
        if (this.listeners.size > 0) this.schedule();
      });
    }, this.intervalMs);
    this.timer.unref();
  }

  /** Reads one snapshot (joined by readers arriving meanwhile) and hands it to every listener. */
  private tick(): Promise<void> {
    this.reading ??= this.read()
      .then((state) => {
        const id = Math.max(state.at, (this.latest?.id ?? 0) + 1);
        const snapshot = { id, frame: `event: ${this.event}\nid: ${id}\ndata: ${JSON.stringify(state)}\n\n` };
        this.latest = snapshot;
        for (const fn of this.listeners) fn(snapshot);
      })
      // A failed read skips one snapshot; readers keep the last and the heartbeats go on.
      .catch(() => undefined)
      .finally(() => {
        this.reading = null;
      });
    return this.reading;
  }
}

/**
 * Feeds kept by key (one per distinct query of a view), shared by that key's readers and dropped
 * with the last of them, so there are never more feeds than open streams.
 */
export class FeedPool {
  private readonly feeds = new Map<string, SnapshotFeed>();

  constructor(
    private readonly event: string,
    private readonly intervalMs: number,
  ) {}

  /**
   * Serves `key`'s feed as `serveFeed` does; `read` makes it when the key has none. The feed is
   * taken only as its reader subscribes: a refused request (HEAD, a bad resume point, the stream
   * cap) never made one, whose entry no reader's leaving would ever drop.
   */
  serve(
    req: Request,
    res: Response,
    key: string,
    read: () => Promise<{ at: number }>,
    live: LiveStreams,
    name: string,
  ): Promise<void> {
    return serveFeed(req, res, () => this.feed(key, read), live, name);
  }

  private feed(key: string, read: () => Promise<{ at: number }>): SnapshotFeed {
    let feed = this.feeds.get(key);
    if (!feed) {
      const made: SnapshotFeed = new SnapshotFeed(this.event, read, this.intervalMs, () => {
        if (this.feeds.get(key) === made) this.feeds.delete(key);
      });
      this.feeds.set(key, (feed = made));
    }
    return feed;
  }
}

/** The snapshot a reader saw last: Last-Event-ID (or `starting_after`), as on task streams. */
export function snapshotResumePoint(req: Request): number {
  const raw = req.headers['last-event-id'] ?? req.query.starting_after;
  if (raw === undefined) return 0;
  if (
    typeof raw !== 'string' ||
    !/^(0|[1-9][0-9]{0,14})$/.test(raw) ||
    Number(raw) > Date.now() + CLOCK_SKEW_MS
  )
    throw new TasklineError(
      'invalid_request',
      'Last-Event-ID and starting_after take the id of a snapshot already sent (a non-negative integer).',
    );
  return Number(raw);
}

/**
 * Serves a feed as SSE with the rules of task streams: `id:` on every snapshot, resume after
 * Last-Event-ID (the current snapshot, unless it is the reader's last, then newer ones: each
 * replaces the last, so none is missed),
 * heartbeats that renew the stream's slot under `name`'s cap, a `retry:` hint on shutdown or
 * when the reader falls `maxBufferBytes` behind, a problem as the last `error` event when the
 * operator's JWT expires. Refusals come before the first byte, and before
 * `feed` is called when it is a function.
 */
export async function serveFeed(
  req: Request,
  res: Response,
  feed: SnapshotFeed | (() => SnapshotFeed),
  live: LiveStreams,
  name: string,
): Promise<void> {
  const after = snapshotResumePoint(req);
  if (req.method === 'HEAD') {
    res.status(200).type('text/event-stream').end();
    return;
  }
  const slot = await live.openStream(name);
  let unsubscribe: () => void = () => undefined;
  let unregister: () => void = () => undefined;
  live.opened?.(1);
  const sse = new SseStream(res, {
    slot,
    heartbeatMs: live.heartbeatMs,
    maxBufferBytes: live.maxBufferBytes,
    retryMs: live.retryMs,
    cacheControl: 'no-store',
    // An operator's JWT: the view ends as a task stream does when it expires.
    expiresAt: req.operator?.expiresAt,
    ends: { expired: () => EXPIRED_EVENT },
    onEnd: () => {
      unsubscribe();
      unregister();
      live.opened?.(-1);
    },
  });
  if (sse.ended) return;
  unregister = live.register({
    kind: 'events',
    end: (retryMs) => (retryMs === undefined ? sse.end() : sse.interrupt(retryMs)),
  });
  // Only this process's ids are in order: the resume point may be another replica's, by its clock,
  // ahead of this one's. So the first snapshot goes unless it is the very one the reader has.
  let last: number | null = null;
  // Taken and subscribed to in one step: its reader is there before anything else can run.
  const source = typeof feed === 'function' ? feed() : feed;
  const unsub = await source.subscribe(after, (s) => {
    if (sse.ended || (last === null ? s.id === after : s.id <= last)) return;
    last = s.id;
    sse.send(s.frame);
  });
  if (sse.ended) unsub();
  else unsubscribe = unsub;
}
