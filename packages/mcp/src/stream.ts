import type { Response } from 'express';
import type { StreamSlot } from '@taskline/admission';
import { whenExpired } from '@taskline/auth';

/** Asked on each heartbeat of a stream, never rejects: false ends it (the key that opened it was revoked). */
export type StillAuthorized = () => Promise<boolean>;

export interface EventStreamOptions {
  /** The stream's place under the tenant's TASKLINE_MAX_STREAMS (shared with LMSP event streams). */
  slot: StreamSlot;
  heartbeatMs: number;
  /** The request's revocation check (`@taskline/auth` `stillAuthorized`), as LMSP streams ask it. */
  stillAuthorized?: StillAuthorized;
  /** When the JWT that opened the stream stops being accepted (ms since the epoch): it is closed then. */
  expiresAt?: number;
  onClose?: () => void;
}

/**
 * Starts an SSE response that holds `slot`: a heartbeat comment every `heartbeatMs` keeps it open
 * through proxies, renews the slot and ends the stream once `stillAuthorized` says no; the stream
 * is closed at `expiresAt` too, without a reply (the client asks again with a fresh token, as
 * after any lost stream); the slot is released when the response closes. Returns the function
 * that sends one JSON-RPC message on it.
 */
export function openEventStream(
  res: Response,
  { slot, heartbeatMs, stillAuthorized, expiresAt, onClose }: EventStreamOptions,
): (message: object) => void {
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  });
  const heartbeat = setInterval(() => {
    res.write(': keep-alive\n\n');
    slot.renew().catch(() => undefined);
    void stillAuthorized?.().then((ok) => ok || res.end());
  }, heartbeatMs);
  const unwatchExpiry = whenExpired(expiresAt, () => res.end());
  const closed = () => {
    clearInterval(heartbeat);
    unwatchExpiry();
    void slot.release().catch(() => undefined);
    onClose?.();
  };
  // A heartbeat left running would renew the released slot into the tenant's count for good.
  whenClosed(res, closed);
  return (message) =>
    res.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', ...message })}\n\n`);
}

/**
 * Runs `fn` once the response closes, or at once if it has: a client may leave while a stream is
 * set up (its slot, its tasks read), and its 'close' has then passed before anyone listened.
 */
export function whenClosed(res: Response, fn: () => void): void {
  if (res.closed) fn();
  else res.once('close', fn);
}
