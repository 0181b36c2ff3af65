import type { Response } from 'express';
import type { StreamSlot } from '@taskline/admission';

/**
 * Starts an SSE response that holds `slot`, its place under the tenant's TASKLINE_MAX_STREAMS
 * (shared with LMSP event streams): a heartbeat comment every `heartbeatMs` keeps it open through
 * proxies and renews the slot, which is released when the response closes. Returns the function
 * that sends one JSON-RPC message on it.
 */
export function openEventStream(
  res: Response,
  slot: StreamSlot,
  heartbeatMs: number,
  onClose?: () => void,
): (message: object) => void {
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  });
  const heartbeat = setInterval(() => {
    res.write(': keep-alive\n\n');
    slot.renew().catch(() => undefined);
  }, heartbeatMs);
  res.once('close', () => {
    clearInterval(heartbeat);
    void slot.release().catch(() => undefined);
    onClose?.();
  });
  return (message) =>
    res.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', ...message })}\n\n`);
}
