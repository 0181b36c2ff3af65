/**
 * What the chaos run observes while it runs: fault windows, every answer and its status, the
 * tasks acknowledged to its clients and what each observer saw of them. The load records here,
 * the faults mark their windows, the invariants and the report read it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isTerminal } from '@taskline/engine';
import { ROOT } from '@taskline/testing';
import { send, type Reply } from './client.js';

/** One promise the run checks: how many cases it checked and what broke it. */
export interface Invariant {
  name: string;
  checked: number;
  violations: string[];
}

export const SECONDS = Number(process.env.TASKLINE_CHAOS_SECONDS ?? 60);
/** `TASKLINE_CHAOS_REDIS=cluster` (`pnpm test:chaos:cluster`): the stack on a Redis Cluster, its faults failovers. */
export const ON_CLUSTER = process.env.TASKLINE_CHAOS_REDIS === 'cluster';
/** After the load stops, every acknowledged task must be terminal within this. */
export const TERMINAL_BOUND_MS = Number(process.env.TASKLINE_CHAOS_TERMINAL_BOUND_MS ?? 90_000);
export const REPORT_DIR = join(ROOT, 'test/chaos/report');
export const LOG_DIR = join(REPORT_DIR, 'logs');
const started = Date.now();
export const elapsed = () => Date.now() - started;
export const rand = (n: number) => Math.floor(Math.random() * n);
export const pick = <T>(xs: readonly T[]): T => xs[rand(xs.length)]!;

type Window = { from: number; to: number };
export const redisDown: Window[] = [];
export const apiDown: Window[] = [];
export const faults: { at_ms: number; target: string; action: string }[] = [];
export const statusCounts: Record<string, number> = {};
/** Every request sent, and those that got no answer at all. */
export const totals = { requests: 0, networkErrors: 0 };
export const fiveXx = {
  allowed_503_redis_down: 0,
  load_balancer_during_api_kill: 0,
  /** Each with the api's request id (`X-Request-Id`), to find what the api logged for it. */
  violations: [] as { text: string; requestId?: string }[],
};

export interface Tracked {
  id: string;
  via: 'lmsp' | 'mcp';
  onRestart: string;
  key?: string;
  cancelRequested: boolean;
  /** First terminal status any observer saw, and every terminal status seen after it. */
  terminalSeen: string[];
}
export const tracked = new Map<string, Tracked>();
/** Idempotency-Key → every task id a 202 named for it (must be one). */
export const idemIds = new Map<string, Set<string>>();
export const sse = { readers: 0, reconnects: 0, events: 0, violations: [] as string[] };
export const listeners = { subscribed: 0, notified: 0, recoveredByPolling: 0, violations: [] as string[] };
export const mcpInput = { asked: 0, answered: 0 };
export const counts = {
  createAttempts: 0,
  createRetries: 0,
  duplicateCreates: 0,
  cancels: 0,
  responses: 0,
  mcpCalls: 0,
};

const within = (ws: Window[], t: number, graceMs: number) =>
  ws.some((w) => t >= w.from && t <= w.to + graceMs);

/** Counts one answer and classifies a 5xx: allowed, the load balancer's, or a broken promise. */
export function note(reply: Reply, what: string): Reply {
  totals.requests++;
  statusCounts[reply.status] = (statusCounts[reply.status] ?? 0) + 1;
  if (reply.status >= 500) {
    const now = Date.now();
    const ours = /problem\+json|application\/json/.test(reply.headers['content-type'] ?? '');
    if (reply.status === 503 && reply.headers['retry-after'] && within(redisDown, now, 5000))
      fiveXx.allowed_503_redis_down++;
    else if (!ours && within(apiDown, now, 3000)) fiveXx.load_balancer_during_api_kill++;
    else
      fiveXx.violations.push({
        text: `${what}: ${reply.status} ${reply.text.slice(0, 160)} at ${elapsed()} ms`,
        requestId: reply.headers['x-request-id'],
      });
  }
  return reply;
}

/**
 * Each 5xx violation with what the api logged for its request (`request_id`): a run that fails in CI
 * names the error behind the answer, not only the answer.
 */
export function explainServerErrors(violations: typeof fiveXx.violations): string[] {
  const lines = readdirSync(LOG_DIR)
    .filter((f) => f.startsWith('api-'))
    .flatMap((f) => readFileSync(join(LOG_DIR, f), 'utf8').split('\n'));
  return violations.map(({ text, requestId }) => {
    if (!requestId) return text;
    const logged = lines.find(
      (l) => l.includes(`"request_id":"${requestId}"`) && /"level":"(error|warn)"/.test(l),
    );
    return `${text} (request ${requestId})${logged ? `; the api logged: ${logged.slice(0, 1500)}` : ''}`;
  });
}

export async function call(
  what: string,
  base: string,
  method: string,
  path: string,
  opts: Parameters<typeof send>[3],
) {
  try {
    return note(await send(base, method, path, opts), what);
  } catch {
    totals.requests++;
    totals.networkErrors++;
    return null;
  }
}

export const retryDelay = (r: Reply | null) =>
  Math.min(2000, Number(r?.headers['retry-after'] ?? 0) * 1000 || 200 + rand(300));

export function observeTerminal(id: string, status: string | undefined) {
  const t = tracked.get(id);
  if (t && status && isTerminal(status as never)) t.terminalSeen.push(status);
}
