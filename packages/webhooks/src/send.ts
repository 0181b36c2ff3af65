/**
 * One delivery attempt over HTTP: a POST to the endpoint through the guarded lookup, no redirect
 * followed (a 3xx is a failed attempt), bounded in time and in the response bytes read.
 */
import http from 'node:http';
import https from 'node:https';
import { checkUrl, guardedLookup, UnsafeTarget, type Reach } from './safety.js';

export interface SendLimits {
  reach: Reach;
  /** The whole attempt, connect to last byte read (TASKLINE_WEBHOOK_TIMEOUT_MS). */
  timeoutMs: number;
  /** Response bytes read at most; the rest is not waited for. */
  maxResponseBytes: number;
}

/** What the attempt log keeps of one attempt. */
export interface AttemptResult {
  ok: boolean;
  /** The HTTP status, null when none came (refused, timed out, connection failed). */
  status: number | null;
  latencyMs: number;
  /** The response body's start (at most 512 characters), or why no response came. */
  response: string;
}

const LOGGED_CHARS = 512;

/** POSTs `body` to `rawUrl`; never throws: a refusal or a network failure is a failed attempt. */
export async function send(
  rawUrl: string,
  headers: Record<string, string>,
  body: string,
  limits: SendLimits,
): Promise<AttemptResult> {
  const started = performance.now();
  const done = (status: number | null, response: string): AttemptResult => ({
    ok: status !== null && status >= 200 && status < 300,
    status,
    latencyMs: Math.round(performance.now() - started),
    response: response.slice(0, LOGGED_CHARS),
  });
  try {
    const url = checkUrl(rawUrl, limits.reach);
    const { status, text } = await request(url, headers, body, limits);
    return done(status, text);
  } catch (err) {
    const reason = err instanceof UnsafeTarget ? `${err.code}: ${err.message}` : (err as Error).message;
    return done(null, reason);
  }
}

function request(
  url: URL,
  headers: Record<string, string>,
  body: string,
  limits: SendLimits,
): Promise<{ status: number; text: string }> {
  const client = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.request(url, {
      method: 'POST',
      agent: false,
      lookup: guardedLookup(limits.reach),
      headers: { 'content-type': 'application/json', 'user-agent': 'Taskline-Webhooks/1', ...headers },
      signal: AbortSignal.timeout(limits.timeoutMs),
    });
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const finish = () =>
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') });
      res.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        size += chunk.length;
        if (size >= limits.maxResponseBytes) {
          finish();
          res.destroy();
        }
      });
      res.on('end', finish);
      res.on('error', reject);
    });
    req.end(body);
  });
}
