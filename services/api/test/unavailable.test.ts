/**
 * Redis answers that mean "try again" (OOM, READONLY, BUSY, MASTERDOWN, LOADING) are not faults of
 * the request: LMSP answers them `503 unavailable` with Retry-After and the reason, MCP with HTTP
 * 503, Retry-After and JSON-RPC -32006 (`data.code: "unavailable"`), and the api counts them in
 * `taskline_redis_unavailable_total{reason}`. Each is produced by a real Redis made to answer it.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import express from 'express';
import OpenAI from 'openai';
import { Redis } from 'ioredis';
import { Admission, TenantLimits } from '@taskline/admission';
import { loadEnv } from '@taskline/config';
import { CallHolds, connectRedis, EventHub, TaskStore } from '@taskline/engine';
import { createLogger } from '@taskline/log';
import { createMcpRouter } from '@taskline/mcp';
import { startRedis, until, type RedisServer } from '@taskline/testing';
import {
  assertMcpUnavailable,
  BASE_ENV,
  call,
  KEY_A,
  mcpCall,
  spawnApi,
  TASK_BODY,
  type ApiProcess,
  type Reply,
} from './helpers.js';

/** What every "try again" must look like on LMSP. */
function assertUnavailable(reply: Reply, reason: string): void {
  assert.equal(reply.status, 503, reply.text);
  assert.equal(reply.headers.get('retry-after'), '1');
  const body = reply.body as { code: string; reason: string };
  assert.equal(body.code, 'unavailable', reply.text);
  assert.equal(body.reason, reason, reply.text);
}

const counted = async (api: ApiProcess, reason: string) =>
  until(`taskline_redis_unavailable_total{reason="${reason}"} to count`, async () => {
    const text = await (await fetch(`${api.metricsBase}/metrics`)).text();
    const line = text
      .split('\n')
      .find((l) => l.startsWith('taskline_redis_unavailable_total') && l.includes(`reason="${reason}"`));
    return line && Number(line.split(' ').at(-1)) >= 1 ? true : undefined;
  });

/**
 * Stops a describe's api, then its Redis servers even when the api never started (it is then
 * unset): a server left running keeps the test process alive.
 */
async function stopAll(api: ApiProcess | undefined, ...servers: RedisServer[]): Promise<void> {
  try {
    if (api) {
      api.child.kill('SIGKILL');
      await api.exited;
    }
  } finally {
    await Promise.all(servers.map((server) => server.stop()));
  }
}

describe('a primary that answers OOM or BUSY', () => {
  let redis: RedisServer;
  let admin: Redis;
  let api: ApiProcess;
  before(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url);
    api = await spawnApi(redis.url);
  });
  after(async () => {
    admin.disconnect();
    await stopAll(api, redis);
  });

  test('OOM (maxmemory reached, noeviction): 503 on LMSP and MCP, counted, and nothing written', async () => {
    const before = await admin.dbsize();
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.config('SET', 'maxmemory', '1');
    try {
      assertUnavailable(await call(api.base, 'POST', '/lmsp/v1/tasks', { body: TASK_BODY }), 'oom');
      assertUnavailable(await call(api.base, 'GET', '/lmsp/v1/models'), 'oom');
      await assertMcpUnavailable(await mcpCall(api.base, 'tools/list', {}), 'oom');
      assert.equal(await admin.dbsize(), before, 'a refused write leaves nothing behind');
    } finally {
      await admin.config('SET', 'maxmemory', '0');
    }
    await counted(api, 'oom');
    const created = await call(api.base, 'POST', '/lmsp/v1/tasks', { body: TASK_BODY });
    assert.equal(created.status, 202, 'once memory is back, the same request succeeds');
  });

  test('the openai SDK retries a 503 (Retry-After: 1, which it waits out), and the retry succeeds once Redis can write', async () => {
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.config('SET', 'maxmemory', '1');
    const statuses: number[] = [];
    const client = new OpenAI({
      apiKey: KEY_A,
      baseURL: `${api.base}/lmsp/v1`,
      // Memory comes back as the first refusal arrives: the retry that follows it can be written.
      fetch: async (url, init) => {
        const res = await fetch(url, init);
        statuses.push(res.status);
        if (res.status === 503) {
          assert.equal(res.headers.get('retry-after'), '1');
          await admin.config('SET', 'maxmemory', '0');
        }
        return res;
      },
    });
    try {
      const created = await client.responses.create({ model: 'tiny-chat', input: 'Hi', background: true });
      assert.equal(created.status, 'queued');
      assert.deepEqual(statuses, [503, 202], 'one refusal, then the retry');
    } finally {
      await admin.config('SET', 'maxmemory', '0');
    }
  });

  test('BUSY (a script past busy-reply-threshold): 503', async () => {
    await admin.config('SET', 'busy-reply-threshold', '50');
    const blocker = new Redis(redis.url);
    // Busy for up to 20 s, or until SCRIPT KILL: long enough for the request below, never a hang.
    const busy = blocker
      .eval(
        "local t = redis.call('TIME'); local s = tonumber(t[1]); while tonumber(redis.call('TIME')[1]) < s + 20 do end return 1",
        0,
      )
      .catch(() => 'killed');
    const probe = new Redis(redis.url, { maxRetriesPerRequest: 0 });
    // Its ready check may meet the busy script too: ioredis retries it, and would print each
    // failure as an unhandled error event into the test's output.
    probe.on('error', () => undefined);
    try {
      await until('Redis to answer BUSY', async () =>
        probe.ping().then(
          () => undefined,
          (err: Error) => (err.message.startsWith('BUSY') ? true : undefined),
        ),
      );
      assertUnavailable(await call(api.base, 'GET', '/lmsp/v1/models'), 'busy');
    } finally {
      await probe.call('SCRIPT', 'KILL').catch(() => undefined);
      await busy;
      blocker.disconnect();
      probe.disconnect();
    }
    await counted(api, 'busy');
  });
});

describe('a Redis that stops answering without closing its connections (a stall)', () => {
  let redis: RedisServer;
  let api: ApiProcess;
  before(async () => {
    redis = await startRedis();
    api = await spawnApi(redis.url, {
      TASKLINE_REDIS_COMMAND_TIMEOUT_MS: '500',
      TASKLINE_REPLICA_ACK_TIMEOUT_MS: '200',
    });
  });
  after(async () => {
    redis.resume();
    await stopAll(api, redis);
  });

  /** The request's answer, or a failure once it has waited far past the command timeout. */
  const within = <T>(what: string, answer: Promise<T>) =>
    Promise.race([
      answer,
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error(`${what}: no answer in 10 s`)), 10_000).unref(),
      ),
    ]);

  test('past TASKLINE_REDIS_COMMAND_TIMEOUT_MS: 503 on LMSP and MCP, not a request that hangs', async () => {
    redis.pause();
    try {
      assertUnavailable(
        await within('create', call(api.base, 'POST', '/lmsp/v1/tasks', { body: TASK_BODY })),
        'timeout',
      );
      assertUnavailable(await within('models', call(api.base, 'GET', '/lmsp/v1/models')), 'timeout');
      await assertMcpUnavailable(await within('tools/list', mcpCall(api.base, 'tools/list', {})), 'timeout');
      const ready = await within('readyz', call(api.base, 'GET', '/readyz', { key: null }));
      assert.equal(ready.status, 503, 'out of its load balancer');
      assert.equal(ready.headers.get('retry-after'), '1');
    } finally {
      redis.resume();
    }
    await counted(api, 'timeout');
    const created = await call(api.base, 'POST', '/lmsp/v1/tasks', { body: TASK_BODY });
    assert.equal(created.status, 202, 'once Redis answers again, the same request succeeds');
  });
});

describe('an api pointed at a replica', () => {
  let primary: RedisServer;
  let replica: RedisServer;
  let admin: Redis;
  let api: ApiProcess;
  before(async () => {
    [primary, replica] = await Promise.all([startRedis(), startRedis()]);
    admin = new Redis(replica.url);
    await admin.call('REPLICAOF', '127.0.0.1', String(primary.port));
    await until('the replica to be in sync', async () =>
      /master_link_status:up/.test(await admin.info('replication')) ? true : undefined,
    );
    api = await spawnApi(replica.url);
  });
  after(async () => {
    admin.disconnect();
    await stopAll(api, primary, replica);
  });

  test('READONLY (a replica after a failover): 503', async () => {
    assertUnavailable(await call(api.base, 'POST', '/lmsp/v1/tasks', { body: TASK_BODY }), 'readonly');
    await assertMcpUnavailable(await mcpCall(api.base, 'tools/list', {}), 'readonly');
    await counted(api, 'readonly');
  });

  test('MASTERDOWN (a replica that lost its primary and serves no stale data): 503', async () => {
    await admin.config('SET', 'replica-serve-stale-data', 'no');
    await primary.kill();
    await until('the replica to lose its primary', async () =>
      /master_link_status:down/.test(await admin.info('replication')) ? true : undefined,
    );
    assertUnavailable(await call(api.base, 'GET', `/lmsp/v1/tasks/task_${'0'.repeat(26)}`), 'masterdown');
    await counted(api, 'masterdown');
  });
});

describe('MCP: a "try again" inside the SDK is a JSON-RPC error, not a failed tool call', () => {
  test('a tool call whose task cannot be written (OOM after the limits answered) gets 503 and -32006', async () => {
    const [tasks, limitsRedis] = await Promise.all([startRedis(), startRedis()]);
    const env = loadEnv({ ...BASE_ENV, REDIS_URL: tasks.url });
    const redis = connectRedis(tasks.url, 'mcp-oom');
    const store = new TaskStore(redis, {
      taskRetentionMs: 60_000,
      eventRetentionMs: 60_000,
      idempotencyTtlS: 86_400,
      idempotencyPendingMs: 30_000,
    });
    const hub = new EventHub(store);
    const limitsConnection = connectRedis(limitsRedis.url, 'mcp-limits');
    const limits = new TenantLimits(limitsConnection, {
      ratePerS: 100,
      burst: 100,
      maxUnfinishedTasks: 100,
      maxStreams: 10,
      streamLeaseMs: 1000,
      unfinishedTtlMs: 3_600_000,
    });
    const reasons: string[] = [];
    const logger = createLogger({ service: 'test' }, 'error', () => undefined);
    const app = express();
    app.use(
      '/mcp',
      createMcpRouter({
        store,
        hub,
        env,
        logger,
        authenticate: async () => ({ id: 'tenant-a' }),
        admission: new Admission({
          store,
          hub,
          holds: new CallHolds(store.redis, 15_000, () => undefined),
          limits,
          logger,
        }),
        observe: {
          taskCreated: () => undefined,
          listener: () => undefined,
          unavailable: (r) => reasons.push(r),
        },
      }),
    );
    const server = createServer(app);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const admin = new Redis(tasks.url);
    try {
      await admin.config('SET', 'maxmemory-policy', 'noeviction');
      await admin.config('SET', 'maxmemory', '1');
      const res = await mcpCall(base, 'tools/call', {
        name: 'generate',
        arguments: { model: 'tiny-chat', input: 'Hi', max_output_tokens: 4 },
      });
      await assertMcpUnavailable(res, 'oom');
      assert.deepEqual(reasons, ['oom']);
      const taskGet = await mcpCall(base, 'tasks/get', { taskId: `task_${'0'.repeat(26)}` });
      // A read needs no memory: an unknown task is still the ordinary -32602.
      assert.equal(taskGet.status, 200);
    } finally {
      await admin.config('SET', 'maxmemory', '0');
      admin.disconnect();
      server.close();
      hub.close();
      redis.disconnect();
      limitsConnection.disconnect();
      await Promise.all([tasks.stop(), limitsRedis.stop()]);
    }
  });
});
