/**
 * The chaos run (`pnpm test:chaos`): the local production shape — Redis with AOF, two api replicas
 * behind HAProxy (deploy/haproxy/haproxy.cfg), two schedulers, two gpu-workers — under steady mixed
 * load while random api, scheduler and worker processes are SIGKILLed and restarted, and Redis is
 * SIGKILLed once and restarted from its AOF. Then it checks Taskline's promises (see README.md in
 * this folder), sheds an overload, and writes test/chaos/report/latest.{json,md}. Exit code 1 when
 * an invariant broke. Loopback only; bounded by TASKLINE_CHAOS_SECONDS (default 60).
 */
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createParser } from 'eventsource-parser';
import { connectRedis, isFinalEventType, isTerminal, TaskStore, type TaskRecord } from '@taskline/engine';
import { bounded, freePort, startRedis, type RedisServer } from '@taskline/testing';
import {
  API_KEYS,
  jsonHeaders,
  KEYS,
  mcpBody,
  mcpHeaders,
  rpcMessages,
  send,
  TENANTS,
  type Reply,
} from './client.js';
import { apiService, ROOT, Service, startHaproxy } from './procs.js';
import { pollStatuses, ROLLING_DRAIN_MS, stopForFault, visibleInvariants } from './visible.js';
import { legacyCounts, legacyInvariant, legacyMcpTask, type LegacyHooks } from './legacy.js';
import { requireMinimums } from './minimums.js';
import * as tools from './tools.js';

const SECONDS = Number(process.env.TASKLINE_CHAOS_SECONDS ?? 60);
/** After the load stops, every acknowledged task must be terminal within this. */
const TERMINAL_BOUND_MS = Number(process.env.TASKLINE_CHAOS_TERMINAL_BOUND_MS ?? 90_000);
const REPORT_DIR = join(ROOT, 'test/chaos/report');
const LOG_DIR = join(REPORT_DIR, 'logs');
const started = Date.now();
const elapsed = () => Date.now() - started;
const rand = (n: number) => Math.floor(Math.random() * n);
const pick = <T>(xs: readonly T[]): T => xs[rand(xs.length)]!;

// ---------- what the run records ----------

type Window = { from: number; to: number };
const redisDown: Window[] = [];
const apiDown: Window[] = [];
const faults: { at_ms: number; target: string; action: string }[] = [];
const statusCounts: Record<string, number> = {};
let requests = 0;
let networkErrors = 0;
const fiveXx = { allowed_503_redis_down: 0, load_balancer_during_api_kill: 0, violations: [] as string[] };

interface Tracked {
  id: string;
  via: 'lmsp' | 'mcp';
  onRestart: string;
  key?: string;
  cancelRequested: boolean;
  /** First terminal status any observer saw, and every terminal status seen after it. */
  terminalSeen: string[];
}
const tracked = new Map<string, Tracked>();
/** Idempotency-Key → every task id a 202 named for it (must be one). */
const idemIds = new Map<string, Set<string>>();
const sse = { readers: 0, reconnects: 0, events: 0, violations: [] as string[] };
const listeners = { subscribed: 0, notified: 0, recoveredByPolling: 0, violations: [] as string[] };
const mcpInput = { asked: 0, answered: 0 };
const counts = {
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
function note(reply: Reply, what: string): Reply {
  requests++;
  statusCounts[reply.status] = (statusCounts[reply.status] ?? 0) + 1;
  if (reply.status >= 500) {
    const now = Date.now();
    const ours = /problem\+json|application\/json/.test(reply.headers['content-type'] ?? '');
    if (reply.status === 503 && reply.headers['retry-after'] && within(redisDown, now, 5000))
      fiveXx.allowed_503_redis_down++;
    else if (!ours && within(apiDown, now, 3000)) fiveXx.load_balancer_during_api_kill++;
    else
      fiveXx.violations.push(`${what}: ${reply.status} ${reply.text.slice(0, 160)} at ${now - started} ms`);
  }
  return reply;
}

async function call(
  what: string,
  base: string,
  method: string,
  path: string,
  opts: Parameters<typeof send>[3],
) {
  try {
    return note(await send(base, method, path, opts), what);
  } catch {
    requests++;
    networkErrors++;
    return null;
  }
}

/** A fault's own step (a kill, a drain, Redis's restart): past it, the run stops and says which. */
const FAULT_BOUND_MS = 30_000;

const retryDelay = (r: Reply | null) =>
  Math.min(2000, Number(r?.headers['retry-after'] ?? 0) * 1000 || 200 + rand(300));

// ---------- the cluster ----------

interface Cluster {
  redis: RedisServer;
  store: TaskStore;
  apis: (Service & { base: string; port: number })[];
  schedulers: Service[];
  workers: Service[];
  haproxy: ChildProcess;
  lb: string;
}

async function startCluster(): Promise<Cluster> {
  mkdirSync(LOG_DIR, { recursive: true });
  const redis = await startRedis();
  const common = {
    REDIS_URL: redis.url,
    TASKLINE_LOG_LEVEL: 'info',
    TASKLINE_METRICS_PORT: '0',
    TASKLINE_LEASE_MS: '1500',
    TASKLINE_MCP_CONFORMANCE_TOOLS: '1',
    ...tools.TOOL_CHAOS_ENV,
  };
  const controlPorts = [await freePort(), await freePort()];
  const schedulers = controlPorts.map(
    (port, i) =>
      new Service(
        `scheduler-${i + 1}`,
        'services/scheduler/src/main.ts',
        {
          ...common,
          TASKLINE_CONTROL_PORT: String(port),
          TASKLINE_CONTROL_ADVERTISE: `127.0.0.1:${port}`,
          TASKLINE_HEARTBEAT_MS: '200',
          TASKLINE_DISPATCH_INTERVAL_MS: '50',
          TASKLINE_LEADER_LEASE_MS: '1500',
          TASKLINE_RECOVERY_INTERVAL_MS: '500',
          TASKLINE_RECONCILE_AFTER_MS: '2000',
          TASKLINE_WORKER_TIMEOUT_MS: '2000',
        },
        join(LOG_DIR, `scheduler-${i + 1}.log`),
        (e) => e.msg === 'ready',
      ),
  );
  const workers = [1, 2].map(
    (i) =>
      new Service(
        `worker-${i}`,
        'services/gpu-worker/src/main.ts',
        {
          ...common,
          TASKLINE_WORKER_ID: `chaos-worker-${i}`,
          TASKLINE_SCHEDULER_ADDR: controlPorts.map((p) => `127.0.0.1:${p}`).join(','),
          // The benchmark model: fixed output, slowed so that kills land mid-generation.
          TASKLINE_WORKER_MODELS: 'instant',
          TASKLINE_WORKER_SLOTS: '4',
          TASKLINE_WORKER_MIN_STEP_MS: '60',
          TASKLINE_HEARTBEAT_MS: '200',
          TASKLINE_DRAIN_DEADLINE_MS: ROLLING_DRAIN_MS,
        },
        join(LOG_DIR, `worker-${i}.log`),
        (e) => e.msg === 'ready',
      ),
  );
  const apiEnv = {
    ...common,
    TASKLINE_API_KEYS: API_KEYS,
    TASKLINE_MODELS: 'instant',
    TASKLINE_SNAPSHOT_MODELS: 'instant',
    TASKLINE_SSE_HEARTBEAT_MS: '1000',
    TASKLINE_RATE_LIMIT_PER_S: '200',
    TASKLINE_RATE_LIMIT_BURST: '300',
    TASKLINE_MAX_ACTIVE_TASKS: '80',
    TASKLINE_IDEMPOTENCY_PENDING_MS: '3000',
  };
  const apis = await Promise.all(
    [1, 2].map((i) => apiService(`api-${i}`, apiEnv, join(LOG_DIR, `api-${i}.log`))),
  );
  const services = [...schedulers, ...workers, ...apis];
  let proxy: Awaited<ReturnType<typeof startHaproxy>>;
  try {
    await Promise.all(services.map((s) => s.start()));
    proxy = await startHaproxy([apis[0]!.port, apis[1]!.port]);
  } catch (err) {
    // A cluster that did not come up is stopped here: no process may outlive the run.
    await Promise.all(services.map((s) => s.stop()));
    await redis.stop();
    throw err;
  }
  const { child: haproxy, lb } = proxy;
  const store = new TaskStore(connectRedis(redis.url, 'chaos-inspect'), {
    taskRetentionMs: 3_600_000,
    eventRetentionMs: 3_600_000,
    idempotencyTtlS: 86_400,
    idempotencyPendingMs: 30_000,
  });
  store.redis.on('error', () => undefined);
  return { redis, store, apis, schedulers, workers, haproxy, lb };
}

// ---------- faults ----------

async function faultLoop(c: Cluster, until: number): Promise<void> {
  // From the start of the load, not of the process: a slow cluster start must not move it first.
  const redisAt = Date.now() + Math.floor(SECONDS * 400);
  let redisDone = false;
  const restarting = new Set<Service>();
  const pending: Promise<void>[] = [];
  while (Date.now() < until) {
    // Often enough that a 20 s run injects every fault kind (see minimums.ts).
    await sleep(600 + rand(1000));
    if (Date.now() >= until) break;
    // Once due, whatever restarts are in progress: they reconnect like every other client.
    if (!redisDone && Date.now() >= redisAt) {
      redisDone = true;
      const w = { from: Date.now(), to: Infinity };
      redisDown.push(w);
      faults.push({ at_ms: elapsed(), target: 'redis', action: 'SIGKILL' });
      await bounded('the Redis kill', FAULT_BOUND_MS, c.redis.kill());
      await sleep(2000);
      await bounded('the Redis restart from its AOF', FAULT_BOUND_MS, c.redis.restart());
      w.to = Date.now();
      faults.push({ at_ms: elapsed(), target: 'redis', action: 'restart from AOF' });
      continue;
    }
    // Only a process that is up; its restart runs alongside, so faults keep coming every few seconds.
    // One api replica always stays: both down is an outage HAProxy rightly answers 503, not a fault to survive.
    const apiRestarting = c.apis.some((a) => restarting.has(a));
    const up = [...c.apis, ...c.schedulers, ...c.workers].filter(
      (s) => !restarting.has(s) && !(apiRestarting && c.apis.includes(s as never)),
    );
    const chosen = tools.chooseFault(up, c);
    if (!chosen) continue;
    const { target, kind } = chosen;
    const isApi = c.apis.includes(target as never);
    const w = { from: Date.now(), to: Infinity };
    if (isApi) apiDown.push(w);
    // A worker drain and pause are tool-chaos kinds of their own (tools.ts); every other kind is a SIGKILL.
    const other = kind === 'worker drain' || kind === 'worker pause' ? tools.workerFault(target, kind) : null;
    const action =
      other?.action ??
      (await bounded(`${kind} of ${target.name}`, FAULT_BOUND_MS, stopForFault(target, false)));
    faults.push({ at_ms: elapsed(), target: target.name, action });
    restarting.add(target);
    if (other && !other.restart) {
      pending.push(other.done.then(() => void restarting.delete(target)));
      continue;
    }
    if (other) await bounded(`${kind} of ${target.name}`, FAULT_BOUND_MS, other.done);
    pending.push(
      (async () => {
        await sleep(300 + rand(1200));
        await target
          .start()
          .catch((err: Error) =>
            faults.push({ at_ms: elapsed(), target: target.name, action: `restart failed: ${err.message}` }),
          );
        restarting.delete(target);
        w.to = Date.now();
      })(),
    );
  }
  // Each restart gives up after 120 s (Service.start) and records the failure.
  await bounded('the restarts of killed processes', 150_000, Promise.all(pending));
}

// ---------- load: LMSP ----------

function observeTerminal(id: string, status: string | undefined) {
  const t = tracked.get(id);
  if (t && status && isTerminal(status as never)) t.terminalSeen.push(status);
}

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
          requests++;
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
        networkErrors++;
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

// ---------- load driver ----------

async function loop(until: number, everyMs: number, fn: () => Promise<void>, inflight: Promise<void>[]) {
  while (Date.now() < until) {
    inflight.push(fn());
    await sleep(everyMs / 2 + rand(everyMs));
  }
}

// ---------- invariants ----------

interface Invariant {
  name: string;
  checked: number;
  violations: string[];
}

async function checkInvariants(c: Cluster): Promise<Invariant[]> {
  const deadline = Date.now() + TERMINAL_BOUND_MS;
  const records = new Map<string, TaskRecord | null>();
  // Every acknowledged task reaches a terminal state within the bound.
  for (;;) {
    let open = 0;
    for (const t of tracked.values()) {
      const rec = await c.store.get(t.id);
      records.set(t.id, rec);
      if (rec && isTerminal(rec.status)) observeTerminal(t.id, rec.status);
      else open++;
    }
    if (open === 0 || Date.now() > deadline) break;
    await sleep(500);
  }
  const exists: Invariant = {
    name: 'acknowledged task exists and is terminal within the bound',
    checked: 0,
    violations: [],
  };
  const stable: Invariant = { name: 'terminal state never changes', checked: 0, violations: [] };
  const streams: Invariant = {
    name: 'event stream is 1..N, no gap or duplicate, one final event, last',
    checked: 0,
    violations: [],
  };
  const policy: Invariant = { name: 'on_restart policy applied', checked: 0, violations: [] };
  const idem: Invariant = {
    name: 'retried idempotent creates made no duplicates',
    checked: 0,
    violations: [],
  };
  const outputs = new Map<string, number>();
  for (const t of tracked.values()) {
    const rec = records.get(t.id) ?? null;
    exists.checked++;
    if (!rec) {
      exists.violations.push(`${t.id} (${t.via}) is missing`);
      continue;
    }
    if (!isTerminal(rec.status)) exists.violations.push(`${t.id} (${t.via}) still ${rec.status}`);
    stable.checked++;
    const distinct = new Set([...t.terminalSeen, ...(isTerminal(rec.status) ? [rec.status] : [])]);
    if (distinct.size > 1) stable.violations.push(`${t.id}: seen ${[...distinct].join(' then ')}`);
    streams.checked++;
    const { events } = await c.store.events(t.id, 0);
    const seqs = events.map((e) => e.seq);
    if (seqs.some((s, i) => s !== i + 1) || seqs.length !== rec.seq)
      streams.violations.push(`${t.id}: stored seqs ${seqs.slice(0, 30).join(',')} (record seq ${rec.seq})`);
    if (t.via === 'lmsp') {
      const finals = events.filter((e) => isFinalEventType(e.type));
      if (isTerminal(rec.status) && (finals.length !== 1 || !isFinalEventType(events.at(-1)!.type)))
        streams.violations.push(`${t.id}: ${finals.length} final events, last ${events.at(-1)?.type}`);
      const text = (rec.result as { output?: { content?: { text?: string }[] }[] } | null)?.output?.[0]
        ?.content?.[0]?.text;
      if (rec.status === 'succeeded' && text !== undefined) outputs.set(text, (outputs.get(text) ?? 0) + 1);
    }
  }
  // The instant model's output is fixed, so every completed task must carry exactly it, however
  // often it was restarted: retry starts over, resume continues after its snapshot.
  const canonical = [...outputs.entries()].sort((a, b) => b[1] - a[1])[0]?.[0];
  const policyStats: Record<
    string,
    { tasks: number; interrupted: number; failed_restarted: number; succeeded: number }
  > = {};
  for (const t of tracked.values()) {
    const rec = records.get(t.id);
    if (!rec || t.via !== 'lmsp' || !isTerminal(rec.status)) continue;
    const s = (policyStats[t.onRestart] ??= { tasks: 0, interrupted: 0, failed_restarted: 0, succeeded: 0 });
    s.tasks++;
    const restarted = rec.error?.code === 'server_restarted';
    const interrupted = rec.attempt > 1 || restarted;
    if (interrupted) s.interrupted++;
    if (restarted) s.failed_restarted++;
    if (rec.status === 'succeeded') s.succeeded++;
    policy.checked++;
    if (t.onRestart === 'fail' && rec.attempt > 1)
      policy.violations.push(`${t.id}: on_restart fail ran ${rec.attempt} attempts`);
    if (t.onRestart !== 'fail' && restarted)
      policy.violations.push(`${t.id}: on_restart ${t.onRestart} ended failed server_restarted`);
    const text = (rec.result as { output?: { content?: { text?: string }[] }[] } | null)?.output?.[0]
      ?.content?.[0]?.text;
    if (rec.status === 'succeeded' && canonical !== undefined && text !== canonical)
      policy.violations.push(
        `${t.id}: on_restart ${t.onRestart}, attempt ${rec.attempt}: output ${JSON.stringify(text)?.slice(0, 80)} is not the model's`,
      );
  }
  for (const [key, ids] of idemIds) {
    idem.checked++;
    if (ids.size !== 1) idem.violations.push(`${key} named ${[...ids].join(', ')}`);
  }
  // No task record beyond those the keys named: scan every LMSP task of the tenant.
  const keyed = new Set([...idemIds.values()].flatMap((s) => [...s]));
  let cursor = '0';
  let stored = 0;
  const unacknowledged: string[] = [];
  do {
    const [next, keys] = await c.store.redis.scan(cursor, 'MATCH', 'tl:{*}:task', 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      const [tenant, kind, request] = await c.store.redis.hmget(key, 'tenant', 'kind', 'request');
      if (tenant !== TENANTS.a || kind !== 'response' || !request?.includes('task chaos-')) continue;
      stored++;
      const id = key.slice(4, -6);
      if (!keyed.has(id)) unacknowledged.push(id);
    }
  } while (cursor !== '0');
  // A create whose every answer was lost exists without a 202: allowed (the client gave up), and
  // it is never a second task for a key that was acknowledged.
  idem.checked += stored;
  (idem as Invariant & { stored: number; unacknowledged: number }).stored = stored;
  (idem as Invariant & { unacknowledged: number }).unacknowledged = unacknowledged.length;
  for (const id of unacknowledged) {
    const request = (await c.store.get(id))?.request as { input?: string } | undefined;
    const key = /task (chaos-[\w-]+)/.exec(String(request?.input))?.[1];
    if (key && idemIds.has(key)) idem.violations.push(`${id}: a second task for acknowledged key ${key}`);
  }
  const noServerErrors: Invariant = {
    name: 'no 5xx except 503 + Retry-After while Redis was down',
    checked: requests,
    violations: fiveXx.violations,
  };
  const listenersInv: Invariant = {
    name: 'listeners got the terminal notification or recovered it by polling',
    checked: listeners.subscribed,
    violations: listeners.violations,
  };
  const sseInv: Invariant = {
    name: 'SSE readers (reconnecting with Last-Event-ID) saw 1..N and one final event',
    checked: sse.readers,
    violations: sse.violations,
  };
  Object.assign(policy, { per_policy: policyStats });
  return [exists, stable, streams, sseInv, policy, idem, noServerErrors, listenersInv, legacyInvariant()];
}

// ---------- overload ----------

async function overload(c: Cluster) {
  const rss = () =>
    c.apis.map((a) => {
      try {
        const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${a.child!.pid}/status`, 'utf8'));
        return Math.round(Number(m?.[1] ?? 0) / 1024);
      } catch {
        return 0;
      }
    });
  const before = rss();
  let peak = before;
  const shed: Record<string, number> = {};
  let withoutRetryAfter = 0;
  let sent = 0;
  const until = Date.now() + Math.max(4000, SECONDS * 100);
  const body = JSON.stringify({ type: 'response', input: { model: 'instant', input: 'overload' } });
  const sampler = setInterval(() => (peak = rss().map((v, i) => Math.max(v, peak[i]!))), 250);
  await Promise.all(
    Array.from({ length: 48 }, async () => {
      while (Date.now() < until) {
        sent++;
        const r = await send(c.lb, 'POST', '/lmsp/v1/tasks', { headers: jsonHeaders(KEYS.b), body }).catch(
          () => null,
        );
        const s = String(r?.status ?? 'network');
        shed[s] = (shed[s] ?? 0) + 1;
        if (r && (r.status === 429 || r.status === 503) && !r.headers['retry-after']) withoutRetryAfter++;
      }
    }),
  );
  clearInterval(sampler);
  // Recovery on its own: once the load drops, a create is accepted again within the bound.
  const dropped = Date.now();
  let recoveredMs: number | null = null;
  while (Date.now() - dropped < 60_000) {
    const r = await send(c.lb, 'POST', '/lmsp/v1/tasks', { headers: jsonHeaders(KEYS.b), body }).catch(
      () => null,
    );
    if (r?.status === 202) {
      recoveredMs = Date.now() - dropped;
      break;
    }
    await sleep(Number(r?.headers['retry-after'] ?? 1) * 1000);
  }
  const after = rss();
  const violations: string[] = [];
  if (!shed['429'] && !shed['503']) violations.push('no request was shed with 429/503');
  if (withoutRetryAfter > 0) violations.push(`${withoutRetryAfter} shed answers without Retry-After`);
  const other5xx = Object.entries(shed).filter(([s]) => /^5/.test(s) && s !== '503');
  if (other5xx.length) violations.push(`other 5xx under overload: ${JSON.stringify(other5xx)}`);
  if (peak.some((mb) => mb > 1024)) violations.push(`api RSS peaked at ${peak.join('/')} MiB`);
  if (recoveredMs === null) violations.push('no create accepted within 60 s after the load dropped');
  return {
    sent,
    answers: shed,
    rss_mib: { before, peak, after },
    recovered_after_ms: recoveredMs,
    violations,
  };
}

// ---------- main ----------

async function main() {
  process.stdout.write(`chaos: ${SECONDS} s of load and faults; logs in ${LOG_DIR}\n`);
  // Every service start gives up after 120 s (Service.start), HAProxy's after 10 s.
  const c = await startCluster();
  running = c;
  const until = Date.now() + SECONDS * 1000;
  const inflight: Promise<void>[] = [];
  const faultsDone = faultLoop(c, until);
  const load = Promise.all([
    loop(until, 250, () => createTask(c.lb, until), inflight),
    loop(until, 250, () => createTask(c.lb, until), inflight),
    loop(until, 1500, () => respond(c.lb, until), inflight),
    loop(until, 700, () => mcpTask(c.lb, until), inflight),
    pollStatuses(c.lb, () => [...tracked.values()].filter((t) => t.via === 'lmsp').map((t) => t.id), until),
    loop(until, 1400, () => legacyMcpTask(c.lb, until, legacyHooks), inflight),
    loop(until, 600, () => tools.toolTask(c.lb, until), inflight),
    faultsDone,
  ]);
  await bounded('the load and the faults', SECONDS * 1000 + 120_000, load);
  // Every process back up before the checks: the system must finish what it acknowledged.
  for (const s of [...c.apis, ...c.schedulers, ...c.workers])
    if (!s.child || s.child.exitCode !== null || s.child.signalCode !== null)
      await bounded(`the restart of ${s.name}`, 150_000, s.start());
  // Every request has its own timeout and every reader its deadline (the terminal bound).
  await bounded("the load's last requests", TERMINAL_BOUND_MS + 60_000, Promise.all(inflight));
  const checks = async () => {
    const found = [...(await checkInvariants(c)), ...(await tools.checkToolTasks(c.store, c.lb))];
    found.push(...(await visibleInvariants(c.store, [...tracked.values()])).invariants);
    return found;
  };
  const invariants = await bounded('the invariant checks', 2 * TERMINAL_BOUND_MS + 60_000, checks());
  invariants.push(requireMinimums(invariants, faults, tools.REQUIRED_FAULTS));
  const overloadResult = await bounded('the overload', SECONDS * 100 + 120_000, overload(c));
  const report = {
    at: new Date().toISOString(),
    seconds: SECONDS,
    terminal_bound_ms: TERMINAL_BOUND_MS,
    requests,
    network_errors: networkErrors,
    status_counts: statusCounts,
    five_xx: { ...fiveXx, violations: fiveXx.violations.length },
    load: {
      ...counts,
      tasks_tracked: tracked.size,
      sse,
      listeners: { ...listeners, violations: listeners.violations.length },
      mcp_input: mcpInput,
      mcp_2025: { ...legacyCounts, violations: legacyCounts.violations.length },
      tool_tasks: tools.toolStats(),
    },
    faults: {
      total: faults.length,
      by_target: faults.reduce<Record<string, number>>(
        (acc, f) => ((acc[`${f.target} ${f.action}`] = (acc[`${f.target} ${f.action}`] ?? 0) + 1), acc),
        {},
      ),
      timeline: faults,
    },
    invariants: invariants.map((i) => ({
      ...i,
      held: i.violations.length === 0,
      violations: i.violations.slice(0, 50),
      violation_count: i.violations.length,
    })),
    overload: overloadResult,
  };
  mkdirSync(REPORT_DIR, { recursive: true });
  writeFileSync(join(REPORT_DIR, 'latest.json'), JSON.stringify(report, null, 2) + '\n');
  writeFileSync(join(REPORT_DIR, 'latest.md'), markdown(report));
  process.stdout.write(markdown(report));
  await stopCluster(c);
  const broken = report.invariants.some((i) => !i.held) || overloadResult.violations.length > 0;
  process.exit(broken ? 1 : 0);
}

function markdown(r: {
  at: string;
  seconds: number;
  requests: number;
  network_errors: number;
  status_counts: Record<string, number>;
  five_xx: { allowed_503_redis_down: number; load_balancer_during_api_kill: number };
  load: Record<string, unknown>;
  faults: { total: number; by_target: Record<string, number> };
  invariants: {
    name: string;
    checked: number;
    held: boolean;
    violation_count: number;
    violations: string[];
  }[];
  overload: Awaited<ReturnType<typeof overload>>;
}): string {
  const lines = [
    `# Chaos run ${r.at}`,
    '',
    `${r.seconds} s of load; ${r.requests} requests (${r.network_errors} network errors); statuses ${JSON.stringify(r.status_counts)}.`,
    `5xx allowed (503 + Retry-After while Redis was down): ${r.five_xx.allowed_503_redis_down}; from HAProxy while an api replica was down: ${r.five_xx.load_balancer_during_api_kill}.`,
    '',
    `Faults injected: ${r.faults.total} — ${Object.entries(r.faults.by_target)
      .map(([k, v]) => `${k} ×${v}`)
      .join(', ')}.`,
    '',
    `Load: ${JSON.stringify(r.load)}`,
    '',
    '| Invariant | Checked | Held | Violations |',
    '| --- | ---: | :---: | ---: |',
    ...r.invariants.map(
      (i) => `| ${i.name} | ${i.checked} | ${i.held ? 'yes' : '**no**'} | ${i.violation_count} |`,
    ),
    '',
    ...r.invariants.flatMap((i) =>
      i.held ? [] : [`## ${i.name}`, '', ...i.violations.slice(0, 20).map((v) => `- ${v}`), ''],
    ),
    `## Overload`,
    '',
    `${r.overload.sent} creates from 48 concurrent clients: ${JSON.stringify(r.overload.answers)}; api RSS MiB before ${r.overload.rss_mib.before.join('/')}, peak ${r.overload.rss_mib.peak.join('/')}, after ${r.overload.rss_mib.after.join('/')}; accepted again ${r.overload.recovered_after_ms} ms after the load dropped.`,
    ...r.overload.violations.map((v) => `- **${v}**`),
    '',
  ];
  return lines.join('\n');
}

/** The cluster once started: a run that fails stops it too, so no process outlives the run. */
let running: Cluster | null = null;

async function stopCluster(c: Cluster): Promise<void> {
  c.haproxy.kill('SIGKILL');
  c.store.redis.disconnect();
  await Promise.all([...c.apis, ...c.schedulers, ...c.workers].map((s) => s.stop()));
  await c.redis.stop();
}

main().catch(async (err: unknown) => {
  process.stderr.write(`chaos run failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  if (running) await bounded('stopping the cluster', 30_000, stopCluster(running)).catch(() => undefined);
  process.exit(2);
});
