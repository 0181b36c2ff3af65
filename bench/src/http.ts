import { Agent, request } from 'node:http';
import { API_KEY } from './stack.js';
import { nowMs } from './stats.js';

/** Keep-alive connections, as any real client pool would use. */
export const agent = new Agent({ keepAlive: true, maxSockets: 512 });

export interface JsonReply {
  status: number;
  body: Record<string, unknown>;
}

/**
 * POST or GET a JSON API path with the bench tenant's key. A call whose reused keep-alive
 * connection the server closed before answering (ECONNRESET: it closed the connection as idle
 * while the call went out, so it never read it) is sent once more, as Node.js's documentation of
 * `request.reusedSocket` advises; without it a busy host's run died of an unhandled ECONNRESET.
 */
export async function callJson(
  base: string,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<JsonReply> {
  try {
    return await callJsonOnce(base, method, path, body);
  } catch (err) {
    if (!(err instanceof ReusedSocketReset)) throw err;
    return callJsonOnce(base, method, path, body);
  }
}

/** ECONNRESET on a connection the pool had used before. */
class ReusedSocketReset extends Error {}

function callJsonOnce(
  base: string,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<JsonReply> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      `${base}${path}`,
      {
        method,
        agent,
        headers: {
          Authorization: `Bearer ${API_KEY}`,
          ...(payload
            ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload) }
            : {}),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => {
          try {
            resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> });
          } catch (err) {
            reject(err instanceof Error ? err : new Error(String(err)));
          }
        });
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) =>
      reject(req.reusedSocket && err.code === 'ECONNRESET' ? new ReusedSocketReset(err.message) : err),
    );
    req.end(payload);
  });
}

/** Creates an LMSP response task; resolves with its id, or throws on anything but `202`. */
export async function createTask(base: string, input: Record<string, unknown>): Promise<string> {
  const reply = await callJson(base, 'POST', '/lmsp/v1/tasks', { type: 'response', input });
  if (reply.status !== 202) throw new Error(`create answered ${reply.status}: ${JSON.stringify(reply.body)}`);
  return reply.body.id as string;
}

export interface SseEvent {
  type: string;
  data: string;
  /** When the client had the whole event (epoch ms, sub-ms resolution). */
  at: number;
}

export interface SseStream {
  /** Resolves when the server ends the stream (after the final event). */
  done: Promise<void>;
  close(): void;
}

/**
 * Reads a task's SSE stream, handing each event to `onEvent` as soon as its frame is complete.
 * A dedicated connection per stream (no pooling), as a browser's EventSource has.
 */
export function readEvents(
  base: string,
  taskId: string,
  onEvent: (event: SseEvent) => void,
  /** `path`: the stream's address when not an LMSP task's (the same-work peer's). */
  options: { agent?: Agent; path?: string } = {},
): SseStream {
  let close = () => undefined as void;
  const done = new Promise<void>((resolve, reject) => {
    const req = request(
      `${base}${options.path ?? `/lmsp/v1/tasks/${taskId}/events`}`,
      {
        agent: options.agent ?? false,
        headers: { Authorization: `Bearer ${API_KEY}`, Accept: 'text/event-stream' },
      },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          reject(new Error(`events answered ${res.statusCode}`));
          return;
        }
        res.setEncoding('utf8');
        let buffer = '';
        res.on('data', (chunk: string) => {
          const at = nowMs();
          buffer += chunk;
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const frame = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            let type = '';
            let data = '';
            for (const line of frame.split('\n')) {
              if (line.startsWith('event: ')) type = line.slice(7);
              else if (line.startsWith('data: ')) data = line.slice(6);
            }
            if (type) onEvent({ type, data, at });
          }
        });
        res.on('end', () => resolve());
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
    close = () => {
      req.destroy();
      resolve();
    };
  });
  return { done, close: () => close() };
}

export const FINAL_TYPES = new Set([
  'response.completed',
  'response.incomplete',
  'response.failed',
  'response.cancelled',
]);
