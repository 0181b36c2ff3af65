import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { after, before } from 'node:test';
import { createParser } from 'eventsource-parser';
import type { Redis } from 'ioredis';
import { loadEnv } from '@taskline/config';
import { connectRedis, TaskStore, type EventInput, type TaskRecord } from '@taskline/engine';
import { createLogger } from '@taskline/log';
import { ApiService, freePort, startRedis, until, type RedisServer } from '@taskline/testing';
import { UNAVAILABLE_CODE } from '@taskline/mcp';
import { createApp, serve, type RunningServer, type TasklineApi } from '../src/index.js';
import { checkResponse } from './openapi-check.js';

export const KEY_A = 'key-a-0123456789';
export const KEY_B = 'key-b-0123456789';
export const BASE_ENV: Record<string, string> = {
  TASKLINE_API_KEYS: `tenant-a:${KEY_A},tenant-b:${KEY_B}`,
  TASKLINE_MODELS: 'tiny-chat,plain-chat',
  TASKLINE_SNAPSHOT_MODELS: 'tiny-chat',
  TASKLINE_LOG_LEVEL: 'error',
  TASKLINE_PORT: '0',
  TASKLINE_METRICS_PORT: '0',
  TASKLINE_SSE_HEARTBEAT_MS: '200',
  // A test file sends its requests in bursts a client never would; the rate limit has tests of its
  // own (auth-limits.test.ts sets it low), and elsewhere it would only make a busy run flaky.
  TASKLINE_RATE_LIMIT_BURST: '1000',
};

/** One Redis of the test's own, plus a TaskStore on it for playing the worker. */
export interface RedisAndStore {
  redisServer: RedisServer;
  redis: Redis;
  worker: TaskStore;
  close(): Promise<void>;
}

export async function startRedisAndStore(): Promise<RedisAndStore> {
  const redisServer = await startRedis();
  const redis = connectRedis(redisServer.url, 'test-worker');
  const worker = new TaskStore(redis, {
    taskRetentionMs: 600_000,
    eventRetentionMs: 600_000,
    idempotencyTtlS: 86_400,
    idempotencyPendingMs: 30_000,
  });
  return {
    redisServer,
    redis,
    worker,
    async close() {
      redis.disconnect();
      await redisServer.stop();
    },
  };
}

/** An api app in this process, served over real HTTP on a free port. */
export interface InProcessApi {
  api: TasklineApi;
  running: RunningServer;
  base: string;
  /** The api's own connection (a test may close it: Redis unavailable to this api alone). */
  redis: Redis;
  close(): Promise<void>;
}

export async function startApi(
  stack: RedisAndStore,
  env: Record<string, string> = {},
): Promise<InProcessApi> {
  const config = loadEnv({ ...BASE_ENV, REDIS_URL: stack.redisServer.url, ...env });
  const redis = connectRedis(config.REDIS_URL, 'api');
  const logger = createLogger({ service: 'api-test' }, config.TASKLINE_LOG_LEVEL, () => undefined);
  const api = createApp({ env: config, redis, logger });
  const running = await serve(api, '127.0.0.1', 0, logger, config.TASKLINE_HTTP_KEEPALIVE_MS);
  return {
    api,
    running,
    base: `http://127.0.0.1:${running.port}`,
    redis,
    async close() {
      await running.shutdown(2000, 100);
      api.hub.close();
      redis.disconnect();
    },
  };
}

/**
 * One stack and one in-process api for a whole test file: started before its first test, closed
 * after its last; `use` receives them (the file keeps them in its own variables).
 */
export function useStackWithApi(use: (stack: RedisAndStore, api: InProcessApi) => void): void {
  let stack: RedisAndStore | undefined;
  let api: InProcessApi | undefined;
  before(async () => {
    stack = await startRedisAndStore();
    api = await startApi(stack);
    use(stack, api);
  });
  after(async () => {
    await api?.close();
    await stack?.close();
  });
}

/** A real `api` process (its built dist/main.js, as deployed) with its JSON log lines. */
export interface ApiProcess {
  child: ChildProcess;
  base: string;
  /** The process's metrics listener (`TASKLINE_METRICS_PORT`), apart from the api port. */
  metricsBase: string;
  logs: Record<string, unknown>[];
  exited: Promise<number | NodeJS.Signals | null>;
}

/** Starts one on `redisUrl` (`@taskline/testing`'s ApiService, with BASE_ENV and a free port unless `env` names one). */
export async function spawnApi(redisUrl: string, env: Record<string, string> = {}): Promise<ApiProcess> {
  const port = env.TASKLINE_PORT && env.TASKLINE_PORT !== '0' ? Number(env.TASKLINE_PORT) : await freePort();
  // Built: `npx tsc -b` runs before the tests, and tsx would add seconds per start.
  const api = new ApiService(port, { env: { ...BASE_ENV, REDIS_URL: redisUrl, ...env } });
  await api.start();
  return {
    child: api.child!,
    base: api.base,
    metricsBase: api.metricsBase,
    logs: api.logs,
    exited: api.exited,
  };
}

export interface Reply {
  status: number;
  headers: Headers;
  body: unknown;
  text: string;
}

/** fetch + read the body + check the exchange against the OpenAPI document. */
export async function call(
  base: string,
  method: string,
  path: string,
  opts: {
    key?: string | null;
    body?: unknown;
    raw?: string;
    headers?: Record<string, string>;
    skipCheck?: boolean;
  } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key !== null) headers.authorization ??= `Bearer ${opts.key ?? KEY_A}`;
  let body: string | undefined = opts.raw;
  if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(base + path, { method, headers, body });
  const text = await res.text();
  const type = res.headers.get('content-type') ?? '';
  const parsed = type.includes('json') && text ? (JSON.parse(text) as unknown) : text;
  if (!opts.skipCheck)
    checkResponse({ method, url: res.url, status: res.status, headers: res.headers, body: parsed });
  return { status: res.status, headers: res.headers, body: parsed, text };
}

export interface SseEvent {
  event: string;
  id: string;
  data: Record<string, unknown>;
}

/** A real SSE read over fetch: every event, the `retry:` hint, heartbeat comments. */
export interface SseRead {
  status: number;
  headers: Headers;
  events: SseEvent[];
  retry: number | null;
  comments: number;
  /** Resolves when the server ends the stream (or the reader aborts). */
  done: Promise<void>;
  abort(): void;
  /** Resolves once `n` events have arrived. */
  waitFor(n: number): Promise<void>;
}

export async function openSse(
  base: string,
  path: string,
  opts: { key?: string; headers?: Record<string, string>; method?: string; body?: unknown } = {},
): Promise<SseRead> {
  const controller = new AbortController();
  const res = await fetch(base + path, {
    method: opts.method ?? 'GET',
    headers: {
      authorization: `Bearer ${opts.key ?? KEY_A}`,
      accept: 'text/event-stream',
      ...(opts.body ? { 'content-type': 'application/json' } : {}),
      ...opts.headers,
    },
    body: opts.body ? JSON.stringify(opts.body) : undefined,
    signal: controller.signal,
  });
  const read: SseRead = {
    status: res.status,
    headers: res.headers,
    events: [],
    retry: null,
    comments: 0,
    done: Promise.resolve(),
    abort: () => controller.abort(),
    waitFor: async () => undefined,
  };
  const waiters: { n: number; resolve: () => void }[] = [];
  const notify = () => {
    for (const w of [...waiters]) if (read.events.length >= w.n) w.resolve();
  };
  read.waitFor = (n) =>
    new Promise<void>((resolve, reject) => {
      if (read.events.length >= n) return resolve();
      waiters.push({ n, resolve });
      void read.done.then(() =>
        read.events.length >= n
          ? resolve()
          : reject(new Error(`stream ended after ${read.events.length} events`)),
      );
    });
  if (!res.ok || !(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    const text = await res.text();
    (read as { body?: unknown }).body = text ? JSON.parse(text) : null;
    return read;
  }
  const parser = createParser({
    onEvent: (e) => {
      read.events.push({
        event: e.event ?? 'message',
        id: e.id ?? '',
        data: JSON.parse(e.data) as Record<string, unknown>,
      });
      notify();
    },
    onRetry: (ms) => (read.retry = ms),
    onComment: () => read.comments++,
  });
  read.done = (async () => {
    const decoder = new TextDecoder();
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>)
        parser.feed(decoder.decode(chunk, { stream: true }));
    } catch (err) {
      if ((err as Error).name !== 'AbortError') throw err;
    }
  })();
  return read;
}

/** Checks a finished SSE read against the document: status, headers, each event's data. */
export function checkSse(base: string, method: string, path: string, read: SseRead): void {
  checkResponse({
    method,
    url: base + path,
    status: read.status,
    headers: read.headers,
    body: read.events.map((e) => e.data),
  });
  for (const e of read.events) {
    assert.equal(e.data.type, e.event, 'data repeats the event type');
    assert.equal(String(e.data.sequence_number), e.id, 'data repeats the event id');
  }
}

export const TASK_BODY = {
  type: 'response',
  input: {
    model: 'tiny-chat',
    input: [
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Write a long report.' }] },
    ],
  },
  on_restart: 'fail',
};

/** A task as POST /lmsp/v1/tasks answers it: the fields the task tests read. */
export interface TaskReply {
  id: string;
  status: string;
  response: unknown;
  error: { code: string } | null;
  response_id: string;
  events_url: string;
  on_restart: 'fail' | 'retry' | 'resume';
}

/** Creates a task and asserts the 202. */
export async function createTask(
  base: string,
  body: unknown = TASK_BODY,
  headers: Record<string, string> = {},
): Promise<TaskReply> {
  const r = await call(base, 'POST', '/lmsp/v1/tasks', { body, headers });
  assert.equal(r.status, 202, r.text);
  return r.body as TaskReply;
}

export function delta(text: string): EventInput {
  return {
    type: 'response.output_text.delta',
    data: { task_status: 'running', delta: text, item_id: 'msg_1', output_index: 0, content_index: 0 },
  };
}

export function completedResponse(task: TaskRecord, text: string) {
  return {
    id: task.responseId,
    object: 'response',
    created_at: Math.floor(task.createdAt / 1000),
    status: 'completed',
    model: task.model,
    output: [{ id: 'msg_1', type: 'message', role: 'assistant', content: [{ type: 'output_text', text }] }],
    usage: { input_tokens: 3, output_tokens: text.length, total_tokens: 3 + text.length },
    error: null,
    incomplete_details: null,
  };
}

/** Plays the worker on the real engine: claim, start, stream deltas, finish. */
export async function runWorker(store: TaskStore, id: string, deltas: string[]): Promise<void> {
  const { attempt } = await store.claim(id, 'test-worker', 60_000);
  await store.start(id, attempt);
  for (const d of deltas) await store.append(id, attempt, [d.length], [delta(d)]);
  const task = (await store.get(id))!;
  await store.finish(id, attempt, { status: 'succeeded', result: completedResponse(task, deltas.join('')) });
}

/** Waits until the engine has a tiny-chat task for this tenant queued for dispatch (a worker can claim it). */
export async function nextQueued(redis: Redis, tenant = 'tenant-a'): Promise<string> {
  const id = await until(`a queued task of ${tenant}`, async () => {
    const [first] = await redis.zrange(`tl:{sched}:ready:tiny-chat:${tenant}`, 0, 0);
    return first;
  });
  await redis.zrem(`tl:{sched}:ready:tiny-chat:${tenant}`, id);
  return id;
}

const TASKS = 'io.modelcontextprotocol/tasks';

/** One 2026-07-28 MCP request (tenant A), declaring the Tasks extension. */
export const mcpCall = (base: string, method: string, params: Record<string, unknown>) =>
  fetch(`${base}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${KEY_A}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-method': method,
      'mcp-protocol-version': '2026-07-28',
      ...(typeof (params.name ?? params.taskId) === 'string' && {
        'mcp-name': String(params.name ?? params.taskId),
      }),
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 41,
      method,
      params: {
        ...params,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientInfo': { name: 'test', version: '1' },
          'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS]: {} } },
        },
      },
    }),
  });

/** What every "try again" must look like on MCP: HTTP 503, Retry-After and JSON-RPC -32006. */
export async function assertMcpUnavailable(res: Response, reason: string): Promise<void> {
  const text = await res.text();
  assert.equal(res.status, 503, text);
  assert.equal(res.headers.get('retry-after'), '1');
  const message = JSON.parse(text) as { id: unknown; error: { code: number; data: Record<string, unknown> } };
  assert.equal(message.id, 41);
  assert.equal(message.error.code, UNAVAILABLE_CODE, text);
  assert.deepEqual(message.error.data, { code: 'unavailable', reason, retryAfter: 1 });
}
