// The SSE settings and authorization checks every MCP stream runs with.
import type { Response } from 'express';
import type { StreamSlot } from '@taskline/admission';
import type { Env } from '@taskline/config';
import { SseStream } from '@taskline/sse';
import { UNAVAILABLE_CODE } from './errors.js';

/** Asked on each heartbeat of a stream, never rejects: false ends it (the key that opened it was revoked). */
export type StillAuthorized = () => Promise<boolean>;

/** The api's SSE settings, as every stream of every surface takes them. */
export interface StreamSettings {
  heartbeatMs: number;
  maxBufferBytes: number;
  retryMs: number;
}

export const streamSettings = (
  env: Pick<Env, 'TASKLINE_SSE_HEARTBEAT_MS' | 'TASKLINE_SSE_MAX_BUFFER_BYTES' | 'TASKLINE_SSE_RETRY_MS'>,
): StreamSettings => ({
  heartbeatMs: env.TASKLINE_SSE_HEARTBEAT_MS,
  maxBufferBytes: env.TASKLINE_SSE_MAX_BUFFER_BYTES,
  retryMs: env.TASKLINE_SSE_RETRY_MS,
});

export interface EventStreamOptions {
  /** The stream's place under the tenant's TASKLINE_MAX_STREAMS (shared with LMSP event streams). */
  slot: StreamSlot;
  sse: StreamSettings;
  /** The request's revocation check (`@taskline/auth` `stillAuthorized`), as LMSP streams ask it. */
  stillAuthorized?: StillAuthorized;
  /** When the JWT that opened the stream stops being accepted (ms since the epoch): it is closed then. */
  expiresAt?: number;
  /** Called once when the stream ends, however it ends. */
  onClose?: () => void;
}

/** An open MCP stream: JSON-RPC messages as SSE `message` events. */
export interface EventStream {
  send(message: object): void;
  /** Ends the stream, with `last` (the request's response) as its final message when given. */
  end(last?: object): void;
  readonly ended: boolean;
}

const frame = (message: object) =>
  `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', ...message })}\n\n`;

/**
 * Starts an SSE response that holds `slot`, on the api's one SSE implementation (`@taskline/sse`):
 * heartbeats renew the slot, a revoked key or an expired JWT closes the stream without a reply
 * (the client asks again with a fresh token, as after any lost stream), and so does a reader
 * more than TASKLINE_SSE_MAX_BUFFER_BYTES behind; the slot is released when the stream ends.
 */
export function openEventStream(res: Response, o: EventStreamOptions): EventStream {
  const sse = new SseStream(res, {
    slot: o.slot,
    // As the MCP SDK's own streams answer (Streamable HTTP): clients compare it exactly.
    contentType: 'text/event-stream',
    heartbeatMs: o.sse.heartbeatMs,
    maxBufferBytes: o.sse.maxBufferBytes,
    retryMs: o.sse.retryMs,
    stillAuthorized: o.stillAuthorized,
    expiresAt: o.expiresAt,
    onEnd: o.onClose,
  });
  return {
    send: (message) => sse.send(frame(message)),
    end: (last) => sse.end(last && frame(last)),
    get ended() {
      return sse.ended;
    },
  };
}

/**
 * The reply that ends a stream whose Redis read failed after its headers went out: no later
 * event would retry the read, so the stream ends, and the client asks again (as after a 503).
 */
export const streamFailed = (id: unknown) => ({
  id,
  error: {
    code: UNAVAILABLE_CODE,
    message: 'Service unavailable, retry shortly',
    data: { code: 'unavailable', retryAfter: 1 },
  },
});
