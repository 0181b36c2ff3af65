// SSE task streams: rendered frames, heartbeats, slow readers, resume and shutdown.
import type { Request, Response } from 'express';
import {
  historyExpired,
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
import { EXPIRED_EVENT } from '@taskline/auth';
import { SseStream } from '@taskline/sse';
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
  /** Pages of a finished task's history (`TaskStore.events`): a reader of one is fed a page at a time. */
  history: (id: string, after: number, count: number) => Promise<{ events: StoredEvent[]; expired: boolean }>;
  /** Events read per page of a finished task's history (TASKLINE_SSE_HISTORY_PAGE_EVENTS). */
  historyPage: number;
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
 * Serves a task's events as SSE (`@taskline/sse`): what the client missed (from Redis, on any
 * replica), then live events from this process's hub, then the one final event, then the end of
 * the response. A finished task's history is read and written a page at a time, each page once
 * the reader has taken the last: a reader that stops reading holds one page, not the history.
 * Errors before the first byte (open-stream cap, expired history) are thrown for problem+json.
 */
export async function streamTaskEvents(req: Request, res: Response, o: StreamOptions): Promise<void> {
  const finished = isTerminal(o.task.status);
  let buffered: StoredEvent[] | null = [];
  let sub: Subscription | null = null;
  let lastSeq = o.after;
  const deliver = (event: StoredEvent) => (buffered ? buffered.push(event) : write(event));
  // The open-stream slot and the first read are asked for together (one round trip, not two);
  // a refused slot (429) speaks before a failed read.
  const [slotted, read] = await Promise.allSettled([
    o.slot ?? o.limits.openStream(o.tenant),
    finished ? o.history(o.task.id, o.after, o.historyPage) : o.hub.subscribe(o.task.id, o.after, deliver),
  ]);
  if (slotted.status === 'rejected' || read.status === 'rejected' || (finished && expiredPage(read))) {
    if (read.status === 'fulfilled' && !finished) (read.value as Subscription).close();
    if (slotted.status === 'fulfilled') await slotted.value.release().catch(() => undefined);
    if (slotted.status === 'rejected') throw slotted.reason;
    throw read.status === 'rejected' ? read.reason : historyExpired();
  }
  if (!finished) sub = read.value as Subscription;
  let unregister: () => void = () => undefined;
  o.metrics?.sseStreamsOpen.inc({ protocol: 'lmsp' });
  const sse = new SseStream(res, {
    slot: slotted.value,
    heartbeatMs: o.heartbeatMs,
    maxBufferBytes: o.maxBufferBytes,
    retryMs: o.retryMs,
    stillAuthorized: o.stillAuthorized,
    expiresAt: o.expiresAt,
    ends: {
      interrupted: o.interrupted && (() => o.interrupted!(lastSeq)),
      revoked: o.revoked && (() => o.revoked!(lastSeq)),
      expired: () => o.expired?.(lastSeq) ?? EXPIRED_EVENT,
    },
    onEnd: () => {
      o.metrics?.sseStreamsOpen.dec({ protocol: 'lmsp' });
      sub?.close();
      unregister();
    },
    warn: (message, fields) => o.logger.warn(message, { task: o.task.id, ...fields }),
  });
  if (sse.ended) return;
  unregister = o.streams.add({
    kind: o.kind,
    end: (retryMs) => (retryMs === undefined ? sse.end() : sse.interrupt(retryMs)),
  });

  const counted = (event: StoredEvent) => {
    lastSeq = event.seq;
    o.metrics?.eventsDeliveredTotal.inc({ protocol: 'lmsp' });
    // Live events only: a replayed one measures how late its reader came, not delivery.
    if (event.writtenAt)
      o.metrics?.eventDeliverySeconds.observe({ protocol: 'lmsp' }, (Date.now() - event.writtenAt) / 1000);
    return formatEvent(event, o.task);
  };
  function write(event: StoredEvent) {
    if (sse.ended) return;
    sse.send(counted(event));
    if (isFinalEventType(event.type)) sse.end();
  }

  if (finished) {
    // A finished task's log no longer changes: no subscription, the pages are the whole stream.
    let page = (read.value as { events: StoredEvent[] }).events;
    try {
      while (page.length > 0 && !sse.ended) {
        for (const event of page) await sse.write(counted(event));
        page = page.length < o.historyPage ? [] : (await o.history(o.task.id, lastSeq, o.historyPage)).events;
      }
    } catch (err) {
      // Redis failed a page: the reader resumes from its last event, as after any cut-off.
      o.logger.warn('stream history read failed', { task: o.task.id, err });
      return sse.interrupt();
    }
    return sse.end();
  }
  const pending = buffered;
  buffered = null;
  for (const event of pending) write(event);
}

/** A first page of history that misses events asked for: they are no longer kept. */
const expiredPage = (read: PromiseFulfilledResult<unknown>) =>
  (read.value as { expired?: boolean }).expired === true;
