/** The one SSE stream every Taskline surface serves (LMSP, OpenAI, MCP, the console): its whole life on the wire. */
import type { ServerResponse } from 'node:http';
import { whenExpired } from '@taskline/auth';

/** A stream's place under its tenant's TASKLINE_MAX_STREAMS: held while it is open. */
export interface SseSlot {
  renew(): Promise<void>;
  release(): Promise<void>;
}

/** How a surface ends a stream that did not end by itself: the last frame each way, if any. */
export interface SseEnds {
  /** Written before the `retry:` hint of a stream cut short (shutdown, a slow reader). */
  interrupted?(): string;
  /** Written last when `stillAuthorized` says no (the key that opened it was revoked). */
  revoked?(): string;
  /** Written last when the JWT that opened it expires (`expiresAt`). */
  expired?(): string;
}

export interface SseOptions {
  slot: SseSlot;
  /** A comment this often keeps the stream alive through proxies and renews the slot (TASKLINE_SSE_HEARTBEAT_MS). */
  heartbeatMs: number;
  /** A reader this far behind is cut off (TASKLINE_SSE_MAX_BUFFER_BYTES), unless the writer waits for it (`write`). */
  maxBufferBytes: number;
  /** The `retry:` hint of a stream cut off for a slow reader (TASKLINE_SSE_RETRY_MS). */
  retryMs: number;
  /** Content-Type and Cache-Control when not the defaults (`text/event-stream; charset=utf-8`, `no-cache, no-transform`). */
  contentType?: string;
  cacheControl?: string;
  /** Asked on every heartbeat, never rejects: false ends the stream. */
  stillAuthorized?: () => Promise<boolean>;
  /** When the JWT that opened the stream stops being accepted (ms since the epoch): the stream ends then. */
  expiresAt?: number;
  ends?: SseEnds;
  /** Called once when the stream ends, however it ends (the surface lets go of what it follows). */
  onEnd?: () => void;
  /** Failures that lose nothing but deserve a log line. */
  warn?: (message: string, fields: Record<string, unknown>) => void;
}

/**
 * An open SSE response. Frames given to `send` in one tick leave in one write (the hub hands on
 * a script's events together); a reader more than `maxBufferBytes` behind is cut off with a
 * `retry:` hint, so a slow client costs bounded memory. `write` is for a writer that can wait
 * instead (history already stored): it returns once the reader has caught up.
 */
export class SseStream {
  private unsent = '';
  private over = false;
  private readonly heartbeat: NodeJS.Timeout;
  private readonly unwatchExpiry: () => void;

  /** Writes the headers (status 200) and arms the heartbeat, the expiry and the close handling. */
  constructor(
    private readonly res: ServerResponse,
    private readonly o: SseOptions,
  ) {
    res.writeHead(200, {
      'Content-Type': o.contentType ?? 'text/event-stream; charset=utf-8',
      'Cache-Control': o.cacheControl ?? 'no-cache, no-transform',
      // nginx (and ingresses built on it) would otherwise hold the events back in its buffer.
      'X-Accel-Buffering': 'no',
    });
    res.flushHeaders();
    this.heartbeat = setInterval(() => {
      res.write(': keep-alive\n\n');
      o.slot.renew().catch((err: unknown) => o.warn?.('stream slot renew failed', { err }));
      void o.stillAuthorized?.().then((ok) => ok || this.end(o.ends?.revoked?.()));
    }, o.heartbeatMs);
    this.unwatchExpiry = whenExpired(o.expiresAt, () => this.end(o.ends?.expired?.()));
    // The client may have left while the stream was set up: its 'close' has passed already. A
    // heartbeat left running would renew the released slot into the tenant's count for good.
    if (res.closed || res.socket?.destroyed) this.end();
    else res.once('close', () => this.end());
  }

  /** The stream has ended (by the client, the server, a cut-off): nothing more is written. */
  get ended(): boolean {
    return this.over;
  }

  /** Queues a frame; a reader too far behind once it leaves is cut off. */
  send(frame: string): void {
    if (this.over) return;
    if (!this.unsent) process.nextTick(() => this.flush(true));
    this.unsent += frame;
  }

  /** Writes a frame at once and waits while the reader is more than `maxBufferBytes` behind. */
  async write(frame: string): Promise<void> {
    this.flush(false);
    if (this.over) return;
    this.res.write(frame);
    while (!this.over && this.res.writableLength > this.o.maxBufferBytes)
      await new Promise<void>((resolve) => {
        const done = () => {
          this.res.off('drain', done);
          this.res.off('close', done);
          resolve();
        };
        this.res.once('drain', done);
        this.res.once('close', done);
      });
  }

  /** Ends the stream, with `last` as its final frame. */
  end(last?: string): void {
    if (this.over) return;
    this.flush(false);
    this.close(last);
  }

  /** Ends the stream cut short, with the surface's `interrupted` frame and a `retry:` hint: the client resumes. */
  interrupt(retryMs = this.o.retryMs): void {
    if (this.over) return;
    this.flush(false);
    this.close(`${this.o.ends?.interrupted?.() ?? ''}retry: ${retryMs}\n\n`);
  }

  private flush(cut: boolean): void {
    if (!this.unsent || this.over) return;
    const chunk = this.unsent;
    this.unsent = '';
    this.res.write(chunk);
    if (cut && this.res.writableLength > this.o.maxBufferBytes) {
      this.o.warn?.('slow stream reader cut off', { buffered: this.res.writableLength });
      this.interrupt();
    }
  }

  private close(last?: string): void {
    this.over = true;
    clearInterval(this.heartbeat);
    this.unwatchExpiry();
    void this.o.slot.release().catch((err: unknown) => this.o.warn?.('stream slot release failed', { err }));
    if (!this.res.writableEnded) this.res.end(last);
    this.o.onEnd?.();
  }
}
