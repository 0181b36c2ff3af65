import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Redis } from 'ioredis';
import { connectRedis } from '@taskline/engine';
import { taskKeys } from '@taskline/engine/keys';
import { startRedis, startReplica, type RedisServer } from '@taskline/testing';
import {
  assertMcpUnavailable,
  call,
  mcpCall,
  spawnApi,
  startApi,
  startRedisAndStore,
  TASK_BODY,
  type InProcessApi,
  type RedisAndStore,
} from './helpers.js';

/** The api's start-up refusal (its stderr); an api that starts anyway is stopped and fails the test. */
async function refusedStart(redisUrl: string, env: Record<string, string> = {}): Promise<string> {
  const started = await spawnApi(redisUrl, env).catch((err: Error) => err);
  if (started instanceof Error) {
    assert.match(started.message, /exited with 1/);
    return started.message;
  }
  started.child.kill('SIGKILL');
  await started.exited;
  assert.fail('the api started against a Redis that breaks its durability promise');
}

describe('a Redis with a replica', () => {
  let stack: RedisAndStore;
  let replica: RedisServer;
  let onReplica: Redis;
  /** A 400 ms WAIT: what a stopped replica runs out. */
  let api: InProcessApi;
  /**
   * A replica of the api whose WAIT no starved host outlasts (the replica, a process at the test
   * lane's priority, once took more than 400 ms to acknowledge): for the writes that must be
   * acknowledged. Both read the same Redis, as an api's replicas do.
   */
  let patient: InProcessApi;
  before(async () => {
    stack = await startRedisAndStore();
    replica = await startReplica(stack.redisServer);
    onReplica = connectRedis(replica.url, 'replica-reader');
    api = await startApi(stack, { TASKLINE_REPLICA_ACK_TIMEOUT_MS: '400' });
    patient = await startApi(stack, {
      TASKLINE_REPLICA_ACK_TIMEOUT_MS: '30000',
      // Which must exceed the WAIT's.
      TASKLINE_REDIS_COMMAND_TIMEOUT_MS: '60000',
    });
  });
  after(async () => {
    replica.resume();
    await api.close();
    await patient.close();
    onReplica.disconnect();
    await replica.stop();
    await stack.close();
  });

  test('a create and a cancel are acknowledged once the replica has them', async () => {
    const created = await call(patient.base, 'POST', '/lmsp/v1/tasks', { body: TASK_BODY });
    assert.equal(created.status, 202);
    const id = (created.body as { id: string }).id;
    assert.equal(await onReplica.hget(taskKeys(id).task, 'status'), 'queued', 'the replica has the task');
    const cancelled = await call(patient.base, 'POST', `/lmsp/v1/tasks/${id}/cancel`);
    assert.equal(cancelled.status, 200);
    assert.equal(await onReplica.hget(taskKeys(id).task, 'status'), 'cancelled');
  });

  test('with the replica stopped past the timeout, nothing is acknowledged: 503 replication_timeout, then the retry gets the task', async () => {
    const queued = await call(patient.base, 'POST', '/lmsp/v1/tasks', { body: TASK_BODY });
    const queuedId = (queued.body as { id: string }).id;
    replica.pause();
    try {
      const headers = { 'idempotency-key': 'replica-stalled-1' };
      const refused = await call(api.base, 'POST', '/lmsp/v1/tasks', { body: TASK_BODY, headers });
      assert.equal(refused.status, 503, refused.text);
      assert.equal((refused.body as { code: string }).code, 'replication_timeout');
      assert.equal(refused.headers.get('retry-after'), '1');
      assert.equal(refused.headers.get('location'), null, 'no handle for a task the replica may lack');

      const cancel = await call(api.base, 'POST', `/lmsp/v1/tasks/${queuedId}/cancel`);
      assert.equal(cancel.status, 503, 'a cancel is not acknowledged either');
      assert.equal((cancel.body as { code: string }).code, 'replication_timeout');

      replica.resume();
      // To the other replica of the api, as a balancer may send a retry.
      const retried = await call(patient.base, 'POST', '/lmsp/v1/tasks', { body: TASK_BODY, headers });
      assert.equal(retried.status, 202, retried.text);
      const id = (retried.body as { id: string }).id;
      assert.equal(await onReplica.hget(taskKeys(id).task, 'status'), 'queued');
    } finally {
      replica.resume();
    }
  });

  test('a keyless create answered 503 names the task it may have made, which keeps its place under the cap', async () => {
    replica.pause();
    let refused: Awaited<ReturnType<typeof call>>;
    try {
      refused = await call(api.base, 'POST', '/lmsp/v1/tasks', { body: TASK_BODY });
    } finally {
      replica.resume();
    }
    assert.equal(refused.status, 503, refused.text);
    const body = refused.body as { code: string; task_id?: string; detail: string };
    assert.equal(body.code, 'replication_timeout');
    assert.equal(typeof body.task_id, 'string', `the problem names the task: ${refused.text}`);
    assert.match(body.detail, new RegExp(body.task_id!));
    // The primary has it, and it will run: the client finds it under that id, not by creating another.
    const found = await call(api.base, 'GET', `/lmsp/v1/tasks/${body.task_id}`);
    assert.equal(found.status, 200, found.text);
    assert.notEqual(
      await stack.redis.zscore('tl:api:active:{tenant-a}', body.task_id!),
      null,
      'it counts under the tenant’s unfinished-task cap',
    );
  });

  test('on MCP a tool task the replica does not confirm is a retryable -32006, not a failed call', async () => {
    const mcpApi = await spawnApi(stack.redisServer.url, { TASKLINE_REPLICA_ACK_TIMEOUT_MS: '400' });
    replica.pause();
    try {
      const res = await mcpCall(mcpApi.base, 'tools/call', {
        name: 'generate',
        arguments: { model: 'tiny-chat', input: 'Hi', max_output_tokens: 4 },
      });
      await assertMcpUnavailable(res, 'replication');
    } finally {
      replica.resume();
      mcpApi.child.kill('SIGTERM');
      await mcpApi.exited;
    }
  });

  test('capabilities state the durability level', async () => {
    const caps = await call(api.base, 'GET', '/lmsp/v1/capabilities');
    assert.deepEqual((caps.body as { durability: unknown }).durability, {
      level: 'always',
      crash_may_lose: 'none: every acknowledged write is on disk (and on every connected replica) first',
      replica_ack_timeout_ms: 400,
    });
  });
});

describe('the start-up check', () => {
  let server: RedisServer;
  let admin: Redis;
  before(async () => {
    server = await startRedis({ appendfsync: 'everysec' });
    admin = connectRedis(server.url, 'admin');
  });
  after(async () => {
    admin.disconnect();
    await server.stop();
  });

  test('refuses appendfsync everysec unless TASKLINE_DURABILITY=everysec, which capabilities then state', async () => {
    const refusal = await refusedStart(server.url);
    assert.match(refusal, /appendfsync everysec/);
    assert.match(refusal, /TASKLINE_DURABILITY=always/);
    const api = await spawnApi(server.url, { TASKLINE_DURABILITY: 'everysec' });
    try {
      const caps = await call(api.base, 'GET', '/lmsp/v1/capabilities');
      const durability = (caps.body as { durability: { level: string; crash_may_lose: string } }).durability;
      assert.equal(durability.level, 'everysec');
      assert.match(durability.crash_may_lose, /second .*power loss/);
    } finally {
      api.child.kill('SIGTERM');
      await api.exited;
    }
  });

  test('refuses a maxmemory-policy that evicts, naming the setting', async () => {
    await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
    try {
      const refusal = await refusedStart(server.url, { TASKLINE_DURABILITY: 'everysec' });
      assert.match(refusal, /maxmemory-policy allkeys-lru/);
      assert.match(refusal, /noeviction/);
    } finally {
      await admin.config('SET', 'maxmemory-policy', 'noeviction');
    }
  });

  test('where CONFIG is not allowed (managed Redis) it trusts the setting, warns and starts', async () => {
    await admin.call('ACL', 'SETUSER', 'managed', 'on', '>managed-secret', '~*', '&*', '+@all', '-config');
    const url = `redis://managed:managed-secret@127.0.0.1:${server.port}`;
    const probe = connectRedis(url, 'probe');
    await assert.rejects(probe.config('GET', 'appendfsync'), /NOPERM/, 'CONFIG is really blocked');
    probe.disconnect();
    // appendfsync is everysec here, but unreadable: the operator's choice is trusted.
    const api = await spawnApi(url);
    try {
      assert.ok(
        api.logs.some((l) => l.level === 'warn' && /CONFIG GET is not allowed/.test(String(l.msg))),
        "api.logs.some((l) => l.level === 'warn' && /CONFIG GET is not allowed/.test(String(l.msg)))",
      );
      assert.equal((await call(api.base, 'GET', '/readyz', { key: null })).status, 200);
      // The eviction policy is read from INFO, which managed Redis allows: still refused.
      await admin.config('SET', 'maxmemory-policy', 'volatile-lru');
      assert.match(await refusedStart(url), /maxmemory-policy volatile-lru/);
    } finally {
      await admin.config('SET', 'maxmemory-policy', 'noeviction');
      api.child.kill('SIGTERM');
      await api.exited;
    }
  });
});
