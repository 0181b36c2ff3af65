import assert from 'node:assert/strict';
import { startRedis, until, type RedisServer } from '@taskline/testing';
import type { Redis } from 'ioredis';
import { connectRedis, pickFair, TaskStore, type NewTask, type TaskRecord } from '../src/index.js';
import type { TaskStoreOptions } from '../src/core.js';

export interface Harness {
  server: RedisServer;
  redis: Redis;
  store: TaskStore;
  close(): Promise<void>;
}

export const defaults: TaskStoreOptions = {
  taskRetentionMs: 60_000,
  eventRetentionMs: 60_000,
  idempotencyTtlS: 86_400,
  idempotencyPendingMs: 30_000,
};

/** A real redis-server with AOF of the test's own, and a store on it. */
export async function harness(options: Partial<TaskStoreOptions> = {}): Promise<Harness> {
  const server = await startRedis();
  const redis = connectRedis(server.url, 'test');
  const store = new TaskStore(redis, { ...defaults, ...options });
  return {
    server,
    redis,
    store,
    async close() {
      redis.disconnect();
      await server.stop();
    },
  };
}

/**
 * A connection to every primary behind `redis`: each node's own on a cluster (test:cluster), else
 * `redis` itself. For what reaches one node only: `CONFIG SET`, `MONITOR`. A cluster client knows
 * its nodes once it has read the slots: before, a PING makes it.
 */
export async function primaries(redis: Redis): Promise<Redis[]> {
  const cluster = redis as unknown as { nodes?: (role: 'master') => Redis[] };
  if (!cluster.nodes) return [redis];
  await redis.ping();
  return cluster.nodes('master');
}

export const newTask = (over: Partial<NewTask> = {}): NewTask => ({
  tenant: 'tenant-a',
  kind: 'response',
  model: 'tiny-chat',
  onRestart: 'fail',
  request: { model: 'tiny-chat', input: 'hello' },
  ...over,
});

export { until } from '@taskline/testing';

/**
 * Eight writers creating tasks back to back until `stop()`: every task a create resolved with is
 * acknowledged; a refused create is counted and retried after `pauseMs`.
 */
export function createBurst(store: TaskStore, pauseMs: number) {
  const acknowledged: TaskRecord[] = [];
  let refused = 0;
  let stopped = false;
  const writers = Array.from({ length: 8 }, async () => {
    while (!stopped) {
      try {
        acknowledged.push(await store.create(newTask()));
      } catch {
        refused++;
        await new Promise((r) => setTimeout(r, pauseMs));
      }
    }
  });
  return {
    acknowledged,
    refused: () => refused,
    stop: async () => {
      stopped = true;
      await Promise.all(writers);
    },
  };
}

/**
 * One dispatch round of `model` (dispatch.lua, on a connection `defineDispatch` prepared, as the
 * leader `lead`) that must pick `id`; returns the attempt its job was offered for.
 */
export async function dispatchOne(scheduler: Redis, model: string, id: string): Promise<number> {
  const picks = await pickFair(scheduler, 'lead', model, 1, {
    quantum: 1,
    maxRunning: 10,
    weights: new Map(),
  });
  assert.deepEqual(
    picks?.map((p) => p.id),
    [id],
  );
  return picks![0]!.state!.attempt;
}

/**
 * SIGKILLs `server` and starts it again loading for seconds: `keys` keys written through `redis`
 * into its AOF's base file (rewritten there in RDB form, which is what key-load-delay slows), loaded
 * at 200 us a key, the server answering (LOADING) between every kilobyte. Resolves once the server
 * is killed, with the restart, which settles once the load is done (its failure is the awaiter's,
 * never an unhandled rejection).
 */
export async function restartLoadingSlowly(
  server: RedisServer,
  redis: Redis,
  keys: number,
): Promise<{ restarting: Promise<void> }> {
  await redis.eval(`for i = 1, ${keys} do redis.call('SET', 'fill:' .. i, i) end return 1`, 0);
  await redis.bgrewriteaof();
  await until('the AOF rewrite', async () =>
    /aof_rewrite_in_progress:0\r?\naof_rewrite_scheduled:0/.test(await redis.info('persistence'))
      ? true
      : undefined,
  );
  await server.kill();
  const restarting = server.restart([
    '--key-load-delay',
    '200',
    '--loading-process-events-interval-bytes',
    '1024',
  ]);
  restarting.catch(() => undefined);
  return { restarting };
}
