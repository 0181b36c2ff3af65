import type { Request, Response } from 'express';
import {
  isFinalEventType,
  isTerminal,
  type EventHub,
  type StoredEvent,
  type Subscription,
  type TaskRecord,
} from '@taskline/engine';
import type { Logger } from '@taskline/log';
import type { TasklineMetrics } from '@taskline/metrics';
import type { StreamSlot, TenantLimits } from '@taskline/admission';
import { EXPIRED_EVENT, whenExpired } from '@taskline/auth';
import { servedEventJson } from './openai/events.js';

/**
 * Frames already rendered, by event: the hub hands one event object to every reader of a task,
 * so 2,000 readers of one event cost one rendering, not 2,000.
 */
const frames = new WeakMap<StoredEvent, string>();

/**
 * One SSE event as LMSP 1.0 section 6.3 frames it: `id` is the sequence number, `data` repeats
 * it; lifecycle events carry their `response` (`openai/events.ts`). The hub hands one event
 * object per task, so the cache by event holds for the task too.
 */
export const formatEvent = (event: StoredEvent, task: TaskRecord): string => {
  let frame = frames.get(event);
  if (frame === undefined) {
    frame = `event: ${event.type}\nid: ${event.seq}\ndata: ${servedEventJson(event, task)}\n\n`;
    frames.set(event, frame);
  }
  return frame;
};

interface OpenStream {
  /** `events`: a resumable task stream, ended at once on shutdown. `response`: a `stream: true` response, left to finish. */
  kind: 'events' | 'response';
  end(retryMs?: number): void;
}

/** The streams this process holds open, so shutdown can end them with a `retry:` hint. */
export class StreamRegistry {
  private readonly open = new Set<OpenStream>();

  add(stream: OpenStream): () => void {
    this.open.add(stream);
    return () => {
      this.open.delete(stream);
    };
  }

  get size(): number {
    return this.open.size;
  }

  /** Ends every resumable stream, telling clients to reconnect (to another replica) after `retryMs`. */
  endResumable(retryMs: number): void {
    for (const s of [...this.open]) if (s.kind === 'events') s.end(retryMs);
  }
}

export interface StreamOptions {
  hub: EventHub;
  limits: TenantLimits;
  streams: StreamRegistry;
  logger: Logger;
  heartbeatMs: number;
  /** A reader this far behind is cut off with a `retry:` hint (not once the final event is written); it resumes with Last-Event-ID. */
  maxBufferBytes: number;
  retryMs: number;
  tenant: string;
  task: TaskRecord;
  after: number;
  kind: 'events' | 'response';
  metrics?: TasklineMetrics;
  /** The stream's slot, when it was opened before the task was created (a streamed create). */
  slot?: StreamSlot;
  /**
   * Written before the `retry:` hint of a stream cut short (shutdown, a slow reader), given the
   * last event sent: OpenAI's `error` event on the OpenAI surface's streams (`openai/events.ts`).
   */
  interrupted?: (lastSeq: number) => string;
  /** Asked on every heartbeat, never rejects: false ends the stream (the key that opened it was revoked). */
  stillAuthorized?: () => Promise<boolean>;
  /** The last frame of a stream ended by `stillAuthorized`, given the last event sent: OpenAI's `error` event on its surface's streams. */
  revoked?: (lastSeq: number) => string;
  /** When the JWT that opened the stream stops being accepted (ms since the epoch): the stream ends then. */
  expiresAt?: number;
  /**
   * The last frame of a stream ended by `expiresAt`, given the last event sent: OpenAI's `error`
   * event on its surface's streams; LMSP's (and the console's) is a problem (`EXPIRED_EVENT`).
   */
  expired?: (lastSeq: number) => string;
}

/**
 * Serves a task's events as SSE: what the client missed (from Redis, on any replica), then live
 * events from this process's hub, then the one final event, then the end of the response.
 * Errors before the first byte (open-stream cap, expired history) are thrown for problem+json.
 */
export async function streamTaskEvents(req: Request, res: Response, o: StreamOptions): Promise<void> {
  let buffered: StoredEvent[] | null = [];
  let done = false;
  let sub: Subscription | null = null;
  let heartbeat: NodeJS.Timeout | undefined = undefined;
  let unregister: () => void = () => undefined;
  let unwatchExpiry: () => void = () => undefined;
  /**
   * Frames not yet written: the hub hands on a script's events (a flush of the worker's) in one
   * go, and they leave in one write per stream, not one write (a syscall) per event.
   */
  let unsent = '';
  let lastSeq = o.after;
  /** The final event is written: the stream is whole, and a slow reader only takes longer to read it. */
  let complete = false;

  const flush = () => {
    if (!unsent) return;
    const chunk = unsent;
    unsent = '';
    if (res.writableEnded) return;
    res.write(chunk);
    if (!complete && res.writableLength > o.maxBufferBytes) {
      o.logger.warn('slow stream reader cut off', { task: o.task.id, buffered: res.writableLength });
      finish(o.retryMs);
    }
  };
  /** `retryMs`: cut short, to be resumed; `last`: a frame to end with instead. */
  const finish = (retryMs?: number, last?: string) => {
    if (done) return;
    flush();
    if (done) return; // the flush cut a slow reader off
    done = true;
    clearInterval(heartbeat);
    unwatchExpiry();
    o.metrics?.sseStreamsOpen.dec({ protocol: 'lmsp' });
    sub?.close();
    unregister();
    void slot.release().catch((err) => o.logger.warn('stream slot release failed', { err }));
    if (!res.writableEnded)
      res.end(retryMs === undefined ? last : `${o.interrupted?.(lastSeq) ?? ''}retry: ${retryMs}\n\n`);
  };
  const write = (event: StoredEvent) => {
    if (done) return;
    if (!unsent) process.nextTick(flush);
    unsent += formatEvent(event, o.task);
    lastSeq = event.seq;
    o.metrics?.eventsDeliveredTotal.inc({ protocol: 'lmsp' });
    // Live events only: a replayed one measures how late its reader came, not delivery.
    if (event.writtenAt)
      o.metrics?.eventDeliverySeconds.observe({ protocol: 'lmsp' }, (Date.now() - event.writtenAt) / 1000);
    if (isFinalEventType(event.type)) {
      complete = true;
      finish();
    }
  };

  // The open-stream slot and the subscription are asked for together (one round trip, not two);
  // a refused slot (429) speaks before a failed subscription.
  const [slotted, subscribed] = await Promise.allSettled([
    o.slot ?? o.limits.openStream(o.tenant),
    o.hub.subscribe(o.task.id, o.after, (event) => (buffered ? buffered.push(event) : write(event))),
  ]);
  if (slotted.status === 'rejected' || subscribed.status === 'rejected') {
    if (subscribed.status === 'fulfilled') subscribed.value.close();
    if (slotted.status === 'fulfilled') await slotted.value.release().catch(() => undefined);
    throw slotted.status === 'rejected' ? slotted.reason : (subscribed as PromiseRejectedResult).reason;
  }
  const slot = slotted.value;
  sub = subscribed.value;
  res.writeHead(200, {
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-cache, no-transform',
    'X-Accel-Buffering': 'no',
  });
  res.flushHeaders();
  o.metrics?.sseStreamsOpen.inc({ protocol: 'lmsp' });
  unregister = o.streams.add({ kind: o.kind, end: finish });
  // Armed before the check below, so that a stream finished there clears it too.
  unwatchExpiry = whenExpired(o.expiresAt, () => finish(undefined, o.expired?.(lastSeq) ?? EXPIRED_EVENT));
  heartbeat = setInterval(() => {
    res.write(': keep-alive\n\n');
    slot.renew().catch((err) => o.logger.warn('stream slot renew failed', { err }));
    void o.stillAuthorized?.().then((ok) => ok || finish(undefined, o.revoked?.(lastSeq)));
  }, o.heartbeatMs);
  res.on('close', () => finish());
  // The client may have left while the history was being read: its 'close' has passed already.
  // Checked once the heartbeat is armed, so that this finish clears it (a heartbeat left running
  // renewed the released slot back into the tenant's count every beat, for good).
  if (req.socket.destroyed) finish();

  const pending = buffered;
  buffered = null;
  for (const event of pending) write(event);
  // Resumed after the final event: nothing more will ever come.
  if (!done && isTerminal(o.task.status) && o.after >= o.task.seq) finish();
}
