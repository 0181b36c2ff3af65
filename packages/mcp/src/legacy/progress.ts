// A plain 2025-era tools/call with a progressToken: its reply becomes an SSE stream of progress, then the result.
import type { ProgressParams } from '../toolTasks.js';
import type { Response } from 'express';

export interface ProgressReply {
  /** Sends a `notifications/progress` (undefined when the caller gave no progressToken). */
  notify?: (progress: ProgressParams) => void;
  /** Answers the call: a JSON body, or the stream's last event once progress was sent. */
  reply(result: unknown): void;
  /** Answers a failure after progress was sent (-32603 on the stream); false when nothing was sent. */
  failed(err: unknown): boolean;
}

/**
 * MCP 2025-11-25 (Progress; Streamable HTTP): notifications related to a request go on the POST's
 * SSE response, before the response itself. The reply stays plain JSON until the first
 * notification, so a call whose tool reports no counts answers as before.
 */
export function progressReply(res: Response, id: unknown, meta: unknown): ProgressReply {
  const token = (meta as { progressToken?: unknown } | undefined)?.progressToken;
  let streaming = false;
  const send = (message: Record<string, unknown>) => {
    if (!streaming) {
      streaming = true;
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache, no-transform' });
    }
    res.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', ...message })}\n\n`);
  };
  const valid = typeof token === 'string' || typeof token === 'number';
  return {
    ...(valid && {
      notify: (progress: ProgressParams) => {
        if (!res.writableEnded)
          send({ method: 'notifications/progress', params: { progressToken: token, ...progress } });
      },
    }),
    reply(result) {
      if (!streaming) return void res.json({ jsonrpc: '2.0', id: id, result });
      send({ id: id, result });
      res.end();
    },
    failed(err) {
      if (!streaming) return false;
      const message = err instanceof Error ? err.message : String(err);
      if (!res.writableEnded) send({ id: id, error: { code: -32603, message } });
      res.end();
      return true;
    },
  };
}
