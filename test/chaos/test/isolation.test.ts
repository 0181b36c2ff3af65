/**
 * Tenant isolation on every route and method: tenant B probing tenant A's task ids — live,
 * finished, expired and deleted — gets answers indistinguishable from an id that never existed,
 * in status, body and headers. Ignored headers (they differ between any two requests): `date`,
 * `x-request-id`. Ids are replaced by a placeholder in bodies, since every answer names the id
 * it was asked about. Latency per kind is printed, not asserted.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import type { Redis } from 'ioredis';
import { connectRedis, newId, problem, TaskStore } from '@taskline/engine';
import { taskKeys } from '@taskline/engine/keys';
import { ApiService, freePort, type RedisServer, startRedis } from '@taskline/testing';
import { API_KEYS, authz, jsonHeaders, KEYS, mcpBody, mcpHeaders, send, type Reply } from '../src/client.js';
import { changedTasks, snapshotTasks } from '../src/records.js';

/** Headers that differ between any two requests, whatever the id. */
export const PER_REQUEST_HEADERS = ['date', 'x-request-id'];
const ROUNDS = 12;

type Probe = { name: string; run: (id: string, key: string) => Promise<Reply> };

/** Status, headers (less the per-request ones) and body with the probed id replaced. */
function fingerprint(reply: Reply, id: string): string {
  const headers = Object.fromEntries(
    Object.entries(reply.headers)
      .filter(([k]) => !PER_REQUEST_HEADERS.includes(k))
      .sort(([a], [b]) => a.localeCompare(b)),
  );
  return JSON.stringify({ status: reply.status, headers, body: reply.text.split(id).join('<ID>') });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

describe('tenant isolation: another tenant\u2019s ids read like ids that never existed', () => {
  let server: RedisServer;
  let redis: Redis;
  let api: ApiService;
  const ids: Record<string, string> = {};

  const probes: Probe[] = [
    {
      name: 'GET /tasks/{id}',
      run: (id, key) => send(api.base, 'GET', `/lmsp/v1/tasks/${id}`, { headers: authz(key) }),
    },
    {
      name: 'POST /tasks/{id}/cancel',
      run: (id, key) => send(api.base, 'POST', `/lmsp/v1/tasks/${id}/cancel`, { headers: authz(key) }),
    },
    {
      name: 'GET /tasks/{id}/events',
      run: (id, key) => send(api.base, 'GET', `/lmsp/v1/tasks/${id}/events`, { headers: authz(key) }),
    },
    {
      name: 'GET /tasks/{id}/events Last-Event-ID: 1',
      run: (id, key) =>
        send(api.base, 'GET', `/lmsp/v1/tasks/${id}/events`, {
          headers: { ...authz(key), 'last-event-id': '1' },
        }),
    },
    ...['tasks/get', 'tasks/cancel', 'tasks/update'].map((method): Probe => ({
      name: `MCP ${method}`,
      run: (id, key) =>
        send(api.base, 'POST', '/mcp', {
          headers: mcpHeaders(key, method, id),
          body: JSON.stringify(
            mcpBody(7, method, {
              taskId: id,
              ...(method === 'tasks/update' ? { inputResponses: { confirm: { action: 'accept' } } } : {}),
            }),
          ),
        }),
    })),
    {
      name: 'MCP subscriptions/listen',
      run: (id, key) =>
        send(api.base, 'POST', '/mcp', {
          headers: mcpHeaders(key, 'subscriptions/listen'),
          body: JSON.stringify(mcpBody(7, 'subscriptions/listen', { notifications: { taskIds: [id] } })),
          timeoutMs: 10_000,
        }),
    },
  ];

  before(async () => {
    server = await startRedis();
    redis = connectRedis(server.url, 'isolation-inspect');
    api = new ApiService(await freePort(), {
      env: {
        REDIS_URL: server.url,
        TASKLINE_API_KEYS: API_KEYS,
        TASKLINE_RATE_LIMIT_PER_S: '10000',
        TASKLINE_RATE_LIMIT_BURST: '10000',
      },
      logFile: `${tmpdir()}/taskline-isolation-api.log`,
    });
    await api.start();
    const create = async () => {
      const r = await send(api.base, 'POST', '/lmsp/v1/tasks', {
        headers: jsonHeaders(KEYS.a),
        body: JSON.stringify({ type: 'response', input: { model: 'tiny-chat', input: 'hi' } }),
      });
      assert.equal(r.status, 202);
      return (r.body as { id: string }).id;
    };
    // Plays the worker on the real engine; a short retention makes `expired` expire for real.
    const finisher = (retentionMs: number) =>
      new TaskStore(redis, {
        taskRetentionMs: retentionMs,
        eventRetentionMs: retentionMs,
        idempotencyTtlS: 60,
        idempotencyPendingMs: 30_000,
      });
    const finish = async (id: string, store: TaskStore) => {
      const { attempt } = await store.claim(id, 'isolation-worker', 60_000);
      await store.finish(id, attempt, { status: 'failed', error: problem('server_restarted', 'x') });
    };
    ids.live = await create();
    ids.finished = await create();
    await finish(ids.finished, finisher(600_000));
    ids.expired = await create();
    await finish(ids.expired, finisher(50));
    const deleted = await create();
    ids.deleted = deleted;
    await finish(deleted, finisher(600_000));
    await redis.del(...Object.values(taskKeys(deleted)).filter((k) => k.includes(deleted)));
    const tool = await send(api.base, 'POST', '/mcp', {
      headers: mcpHeaders(KEYS.a, 'tools/call', 'generate'),
      body: JSON.stringify(mcpBody(1, 'tools/call', { name: 'generate', arguments: { prompt: 'hi' } })),
    });
    ids.mcpTool = String((JSON.parse(tool.text) as { result: { taskId: string } }).result.taskId);
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(await redis.exists(taskKeys(ids.expired).task), 0, 'the expired task has expired');
  });
  after(async () => {
    await api.stop();
    redis.disconnect();
    await server.stop();
  });

  it('answers every probe of a foreign id exactly like one of a never-existing id', async () => {
    const before = await snapshotTasks(redis);
    const timing: Record<string, number[]> = {};
    let compared = 0;
    for (const probe of probes) {
      for (let round = 0; round < ROUNDS; round++) {
        const never = newId('task');
        const baseline = await probe.run(never, KEYS.b);
        // The baseline itself is the documented "no such task" answer, so equality means something.
        if (probe.name.startsWith('MCP subscriptions'))
          assert.match(baseline.text, /"notifications\/subscriptions\/acknowledged".*"taskIds":\[\]/);
        else if (probe.name.startsWith('MCP')) assert.match(baseline.text, /"code":-32602/);
        else assert.equal((baseline.body as { code?: string }).code, 'task_not_found');
        (timing[`${probe.name} | never existed`] ??= []).push(baseline.ms);
        for (const [kind, id] of Object.entries(ids)) {
          const reply = await probe.run(id, KEYS.b);
          (timing[`${probe.name} | ${kind}`] ??= []).push(reply.ms);
          assert.equal(
            fingerprint(reply, id),
            fingerprint(baseline, never),
            `${probe.name} on a ${kind} task of A`,
          );
          compared++;
        }
      }
    }
    assert.deepEqual(changedTasks(before, await snapshotTasks(redis)), [], 'no probe changed a task');
    // The owner still sees its live task: the probes did not miss because the ids were wrong.
    assert.equal(
      (await send(api.base, 'GET', `/lmsp/v1/tasks/${ids.live}`, { headers: authz(KEYS.a) })).status,
      200,
    );
    const lines = Object.entries(timing).map(([k, v]) => `#   ${k}: median ${median(v).toFixed(2)} ms`);
    process.stdout.write(
      `# isolation: ${compared} foreign probes compared; latency (reported, not asserted):\n${lines.join('\n')}\n`,
    );
  });
});
