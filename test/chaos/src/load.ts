/**
 * The chaos run's steady mixed load through HAProxy: LMSP creates retried with one
 * Idempotency-Key (some sent twice on purpose), cancels, SSE readers that drop and resume with
 * Last-Event-ID, synchronous responses, MCP tool tasks answered, cancelled and listened to, MCP
 * 2025-11-25 sessions (legacy.ts), a polling client (visible.ts), tool tasks (tools.ts) and
 * worker-served tool tasks (worker-tools.ts).
 * Everything it sees goes to observed.ts.
 */
import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { createParser } from 'eventsource-parser';
import { isFinalEventType } from '@taskline/engine';
import { jsonHeaders, KEYS, mcpBody, mcpHeaders, rpcMessages } from './client.js';
import type { ChaosStack } from './chaos-stack.js';
import { legacyMcpTask, type LegacyHooks } from './legacy.js';
import {
  call,
  counts,
  idemIds,
  listeners,
  mcpInput,
  note,
  observeTerminal,
  pick,
  rand,
  retryDelay,
  sse,
  statusCounts,
  TERMINAL_BOUND_MS,
  totals,
  tracked,
} from './observed.js';
import * as tools from './tools.js';
import { workerToolTask } from './worker-tools.js';
import { pollStatuses } from './visible.js';

/** A create retried with one Idempotency-Key until acknowledged; sometimes sent twice on purpose. */
async function createTask(lb: string, until: number): Promise<void> {
  const key = `chaos-${randomUUID()}`;
  const onRestart = pick(['fail', 'retry', 'resume'] as const);
  const body = JSON.stringify({
    type: 'response',
    input: { model: 'instant', input: `task ${key}` },
    on_restart: onRestart,
  });
  let id: string | null = null;
  for (let attempt = 0; Date.now() < until + 10_000; attempt++) {
    counts.createAttempts++;
    if (attempt > 0) counts.createRetries++;
    const r = await call('POST /tasks', lb, 'POST', '/lmsp/v1/tasks', {
      headers: jsonHeaders(KEYS.a, { 'idempotency-key': key }),
      body,
    });
    if (r?.status === 202) {
      id = (r.body as { id: string }).id;
      if (!idemIds.has(key)) idemIds.set(key, new Set());
      idemIds.get(key)!.add(id);
      if (tracked.has(id)) break;
      tracked.set(id, { id, via: 'lmsp', onRestart, key, cancelRequested: false, terminalSeen: [] });
      // A client that never saw the 202 and retried: the same task again, never a second one.
      if (Math.random() < 0.2) {
        counts.duplicateCreates++;
        continue;
      }
      break;
    }
    await sleep(retryDelay(r));
  }
  if (!id) return;
  const roll = Math.random();
  if (roll < 0.15) void cancelLater(lb, id);
  if (roll > 0.6) void readEvents(lb, id, until);
}

async function cancelLater(lb: string, id: string): Promise<void> {
  await sleep(rand(1500));
  tracked.get(id)!.cancelRequested = true;
  counts.cancels++;
  for (let i = 0; i < 10; i++) {
    const r = await call('POST /cancel', lb, 'POST', `/lmsp/v1/tasks/${id}/cancel`, {
      headers: jsonHeaders(KEYS.a),
    });
    if (r && r.status < 500) {
      observeTerminal(id, (r.body as { status?: string }).status);
      return;
    }
    await sleep(retryDelay(r));
  }
}

/** An SSE reader that drops its connection at random and resumes with Last-Event-ID. */
async function readEvents(lb: string, id: string, until: number): Promise<void> {
  sse.readers++;
  const seqs: number[] = [];
  const types: string[] = [];
  const deadline = until + TERMINAL_BOUND_MS;
  let done = false;
  while (!done && Date.now() < deadline) {
    const dropAfter = 2 + rand(8);
    let received = 0;
    const last = seqs.at(-1);
    await new Promise<void>((resolve) => {
      const url = new URL(lb);
      const req = httpRequest(
        {
          host: url.hostname,
          port: url.port,
          path: `/lmsp/v1/tasks/${id}/events`,
          headers: {
            authorization: `Bearer ${KEYS.a}`,
            accept: 'text/event-stream',
            ...(last ? { 'last-event-id': String(last) } : {}),
          },
          agent: false,
        },
        (res) => {
          if (res.statusCode !== 200) {
            const chunks: Buffer[] = [];
            res.on('data', (d: Buffer) => chunks.push(d));
            res.on('end', () => {
              const headers = Object.fromEntries(Object.entries(res.headers).map(([k, v]) => [k, String(v)]));
              note(
                {
                  status: res.statusCode ?? 0,
                  headers,
                  text: Buffer.concat(chunks).toString(),
                  body: null,
                  ms: 0,
                },
                'GET /events',
              );
              resolve();
            });
            return;
          }
          totals.requests++;
          statusCounts[200] = (statusCounts[200] ?? 0) + 1;
          const parser = createParser({
            onEvent: (e) => {
              const seq = Number(e.id);
              seqs.push(seq);
              types.push(e.event ?? 'message');
              sse.events++;
              received++;
              if (isFinalEventType(e.event ?? '')) {
                done = true;
                observeTerminal(id, (JSON.parse(e.data) as { task_status?: string }).task_status);
                req.destroy();
                resolve();
              } else if (received >= dropAfter && Math.random() < 0.5) {
                req.destroy();
                resolve();
              }
            },
          });
          res.on('data', (d: Buffer) => parser.feed(d.toString('utf8')));
          res.on('end', resolve);
          res.on('error', () => resolve());
        },
      );
      req.on('error', () => {
        totals.networkErrors++;
        resolve();
      });
      req.setTimeout(20_000, () => req.destroy());
      req.end();
    });
    if (!done) {
      sse.reconnects++;
      await sleep(100 + rand(300));
    }
  }
  const expected = seqs.map((_, i) => i + 1);
  if (JSON.stringify(seqs) !== JSON.stringify(expected))
    sse.violations.push(`${id}: client saw ${seqs.slice(0, 40).join(',')} (not 1..N)`);
  const finals = types.filter(isFinalEventType).length;
  if (done && (finals !== 1 || !isFinalEventType(types.at(-1)!)))
    sse.violations.push(`${id}: ${finals} final events, last ${types.at(-1)}`);
  if (!done) sse.violations.push(`${id}: no final event within the bound`);
}

/** Synchronous LMSP responses with an Idempotency-Key: a retry after a lost answer replays it. */
async function respond(lb: string, until: number): Promise<void> {
  const key = `chaos-resp-${randomUUID()}`;
  for (let i = 0; Date.now() < until + 10_000 && i < 20; i++) {
    counts.responses++;
    const r = await call('POST /responses', lb, 'POST', '/lmsp/v1/responses', {
      headers: jsonHeaders(KEYS.a, { 'idempotency-key': key }),
      body: JSON.stringify({ model: 'instant', input: 'hello' }),
      timeoutMs: 30_000,
    });
    if (r && r.status < 500 && r.status !== 429 && r.status !== 409) return;
    await sleep(retryDelay(r));
  }
}

// ---------- load: MCP ----------

async function mcpCall(lb: string, method: string, params: Record<string, unknown>) {
  counts.mcpCalls++;
  const id = rand(1e9);
  const r = await call(`MCP ${method}`, lb, 'POST', '/mcp', {
    headers: mcpHeaders(KEYS.a, method, (params.taskId ?? params.name) as string | undefined),
    body: JSON.stringify(mcpBody(id, method, params)),
    timeoutMs: 20_000,
  });
  const message = r ? rpcMessages(r).find((m) => m.id === id) : undefined;
  return { r, message };
}

/** A tool task: created over MCP, answered when it asks, sometimes cancelled, sometimes listened to. */
async function mcpTask(lb: string, until: number): Promise<void> {
  const tool = pick(['slow_compute', 'confirm_delete'] as const);
  const args = tool === 'slow_compute' ? { seconds: 1 + rand(2) } : { path: '/tmp/chaos' };
  let taskId: string | null = null;
  for (let i = 0; i < 10 && Date.now() < until + 5000; i++) {
    const { r, message } = await mcpCall(lb, 'tools/call', { name: tool, arguments: args });
    const result = message?.result as { resultType?: string; taskId?: string } | undefined;
    if (result?.resultType === 'task' && result.taskId) {
      taskId = result.taskId;
      break;
    }
    await sleep(retryDelay(r));
  }
  if (!taskId) return;
  tracked.set(taskId, {
    id: taskId,
    via: 'mcp',
    onRestart: 'retry',
    cancelRequested: false,
    terminalSeen: [],
  });
  const listening = Math.random() < 0.5 ? listen(lb, taskId, until) : Promise.resolve();
  const cancel = Math.random() < 0.2;
  const deadline = until + TERMINAL_BOUND_MS;
  let answered = false;
  while (Date.now() < deadline) {
    const { message } = await mcpCall(lb, 'tasks/get', { taskId });
    const status = (message?.result as { status?: string } | undefined)?.status;
    if (status && ['completed', 'failed', 'cancelled'].includes(status)) break;
    if (cancel && !tracked.get(taskId)!.cancelRequested) {
      tracked.get(taskId)!.cancelRequested = true;
      counts.cancels++;
      await mcpCall(lb, 'tasks/cancel', { taskId });
    } else if (status === 'input_required' && !answered) {
      mcpInput.asked++;
      const up = await mcpCall(lb, 'tasks/update', {
        taskId,
        inputResponses: { confirm: { action: 'accept', content: { confirm: 'yes' } } },
      });
      if (up.message?.result) {
        answered = true;
        mcpInput.answered++;
      }
    }
    await sleep(300);
  }
  await listening;
}

/** subscriptions/listen: the terminal notification arrives, or the client recovers it by polling. */
async function listen(lb: string, taskId: string, until: number): Promise<void> {
  listeners.subscribed++;
  const { r } = await mcpCall(lb, 'subscriptions/listen', { notifications: { taskIds: [taskId] } });
  const statuses = r
    ? rpcMessages(r)
        .filter((m) => m.method === 'notifications/tasks')
        .map((m) => String(m.params?.status))
    : [];
  if (statuses.some((s) => ['completed', 'failed', 'cancelled'].includes(s))) {
    listeners.notified++;
    return;
  }
  const deadline = until + TERMINAL_BOUND_MS;
  while (Date.now() < deadline) {
    const { message } = await mcpCall(lb, 'tasks/get', { taskId });
    const status = (message?.result as { status?: string } | undefined)?.status;
    if (status && ['completed', 'failed', 'cancelled'].includes(status)) {
      listeners.recoveredByPolling++;
      return;
    }
    await sleep(500);
  }
  listeners.violations.push(`${taskId}: neither notified nor recovered by polling`);
}

/** What the 2025-11-25 session driver (legacy.ts) uses of this run. */
const legacyHooks: LegacyHooks = {
  call,
  retryDelay,
  key: KEYS.a,
  terminalBoundMs: TERMINAL_BOUND_MS,
  track: (id) =>
    tracked.set(id, { id, via: 'mcp', onRestart: 'retry', cancelRequested: false, terminalSeen: [] }),
  cancelRequested: (id) => {
    if (tracked.get(id)!.cancelRequested) return;
    tracked.get(id)!.cancelRequested = true;
    counts.cancels++;
  },
};

/** One piece of the load (a create and what follows it, an MCP call...), by its kind. */
export interface Inflight {
  kind: string;
  startedAt: number;
  /** When it settled (ms since the epoch); unset while open. */
  settledAt?: number;
  done: Promise<void>;
}

/** The kinds of load that settled last, each with its last settle: what the wait after the load waited for. */
export function lastToSettle(inflight: Inflight[], since: number): string {
  const last = new Map<string, number>();
  for (const e of inflight)
    if (e.settledAt !== undefined) last.set(e.kind, Math.max(last.get(e.kind) ?? 0, e.settledAt));
  return [...last]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 4)
    .map(([kind, at]) => `${kind} +${((at - since) / 1000).toFixed(1)} s`)
    .join(', ');
}

/** The kinds of load still open and since when: what a run that waits too long names. */
export function stillOpen(inflight: Inflight[]): string {
  const open = new Map<string, { count: number; oldest: number }>();
  for (const e of inflight.filter((e) => e.settledAt === undefined)) {
    const o = open.get(e.kind) ?? { count: 0, oldest: e.startedAt };
    open.set(e.kind, { count: o.count + 1, oldest: Math.min(o.oldest, e.startedAt) });
  }
  const now = Date.now();
  return (
    [...open].map(([kind, o]) => `${kind} x${o.count} (oldest ${now - o.oldest} ms)`).join(', ') || 'none'
  );
}

async function loop(
  kind: string,
  until: number,
  everyMs: number,
  fn: () => Promise<void>,
  inflight: Inflight[],
) {
  while (Date.now() < until) {
    const entry: Inflight = { kind, startedAt: Date.now(), done: fn() };
    const settle = () => void (entry.settledAt = Date.now());
    entry.done.then(settle, settle);
    inflight.push(entry);
    await sleep(everyMs / 2 + rand(everyMs));
  }
}

/** Every kind of load until `until`; the requests still open when it returns land in `inflight`. */
export function runLoad(c: ChaosStack, until: number, inflight: Inflight[]): Promise<unknown> {
  return Promise.all([
    loop('LMSP create', until, 250, () => createTask(c.lb, until), inflight),
    loop('LMSP create', until, 250, () => createTask(c.lb, until), inflight),
    loop('LMSP response', until, 1500, () => respond(c.lb, until), inflight),
    loop('MCP task', until, 700, () => mcpTask(c.lb, until), inflight),
    pollStatuses(c.lb, () => [...tracked.values()].filter((t) => t.via === 'lmsp').map((t) => t.id), until),
    loop('MCP 2025-11-25 task', until, 1400, () => legacyMcpTask(c.lb, until, legacyHooks), inflight),
    loop('tool task', until, 600, () => tools.toolTask(c.lb, until), inflight),
    loop('worker tool task', until, 600, () => workerToolTask(c.lb, until), inflight),
  ]);
}
