import { startRedis, type RedisServer } from '@taskline/testing';
import type { Redis } from 'ioredis';
import { connectRedis, TaskStore, type NewTask, type TaskStoreOptions } from '../src/index.js';

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

export const newTask = (over: Partial<NewTask> = {}): NewTask => ({
  tenant: 'tenant-a',
  kind: 'response',
  model: 'tiny-chat',
  onRestart: 'fail',
  request: { model: 'tiny-chat', input: 'hello' },
  ...over,
});

/** Polls `cond` until it holds; fails with `what` after `limitMs` instead of hanging the run. */
export async function until(
  cond: () => boolean | Promise<boolean>,
  what: string,
  limitMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
