/**
 * A local Taskline MCP stack for the conformance run and the MCP tests: a real Redis (AOF), the
 * MCP router on Express over the real engine, and a tool worker that claims `tool` tasks and
 * runs them through `createToolRunner` with leases and cancellation, as `services/gpu-worker`
 * does (it replaces this loop once it runs tool tasks).
 */
import type { Server } from 'node:http';
import express from 'express';
import { loadEnv } from '@taskline/config';
import { connectRedis, EventHub, schedulerKeys, TaskStore, type TaskRecord } from '@taskline/engine';
import { createLogger } from '@taskline/log';
import { createMcpRouter, type McpRouterDeps } from '@taskline/mcp';
import { startRedis, type RedisServer } from '@taskline/testing';
import { createToolRunner, registerConformanceTools, ToolRegistry } from '@taskline/tools';

export interface Replica {
  url: string;
  store: TaskStore;
  close(): Promise<void>;
}

export function storeOn(url: string, name: string): { store: TaskStore; hub: EventHub; close(): void } {
  const redis = connectRedis(url, name);
  const subscriber = connectRedis(url, `${name}-sub`);
  const store = new TaskStore(redis, {
    taskRetentionMs: 3600_000,
    eventRetentionMs: 3600_000,
    idempotencyTtlS: 86400,
    idempotencyPendingMs: 30_000,
  });
  const hub = new EventHub(store, subscriber);
  return { store, hub, close: () => (redis.disconnect(), subscriber.disconnect()) };
}

/** One api replica: the MCP router mounted at /mcp on its own port. */
export async function startReplica(
  redisUrl: string,
  options: {
    env?: NodeJS.ProcessEnv;
    tools?: ToolRegistry;
    authenticate?: McpRouterDeps['authenticate'];
  } = {},
): Promise<Replica> {
  const env = loadEnv({
    TASKLINE_MCP_LOCAL_NO_AUTH: '1',
    TASKLINE_MCP_CONFORMANCE_TOOLS: '1',
    ...options.env,
  });
  const { store, hub, close } = storeOn(redisUrl, 'mcp-replica');
  const app = express();
  app.use(
    '/mcp',
    createMcpRouter({
      store,
      hub,
      env,
      logger: createLogger({ svc: 'mcp' }, 'warn'),
      tools: options.tools,
      authenticate: options.authenticate,
    }),
  );
  const server: Server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://localhost:${port}/mcp`,
    store,
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      close();
    },
  };
}

/** A tool worker: takes queued `tool` tasks from the scheduler index and runs them. */
export function startToolWorker(
  redisUrl: string,
  registry: ToolRegistry,
  workerId = 'tool-worker',
): { stop(): Promise<void> } {
  const { store, hub, close } = storeOn(redisUrl, workerId);
  const runner = createToolRunner(registry, { hub });
  const leaseMs = 3000;
  let stopping = false;
  const running = new Set<Promise<void>>();
  const runOne = async (task: TaskRecord) => {
    let renew: NodeJS.Timeout | undefined;
    try {
      const claimed = await store.claim(task.id, workerId, leaseMs);
      const controller = new AbortController();
      renew = setInterval(() => {
        store.renew(task.id, claimed.attempt, leaseMs).then(
          (status) => status === 'cancelling' && controller.abort(new Error('cancelled')),
          () => controller.abort(new Error('lease lost')),
        );
      }, 200);
      await store.start(task.id, claimed.attempt);
      const finish = await runner.run({
        task: claimed,
        attempt: claimed.attempt,
        signal: controller.signal,
        store,
      });
      const now = await store.get(task.id);
      if (now?.status === 'cancelling') await store.finish(task.id, claimed.attempt, { status: 'cancelled' });
      else await store.finish(task.id, claimed.attempt, finish);
    } catch {
      // Lost races (cancelled before the claim, a newer attempt) leave the task to whoever won.
    } finally {
      clearInterval(renew);
    }
  };
  const loop = (async () => {
    while (!stopping) {
      let found = false;
      for (const tenant of await store.redis.smembers(schedulerKeys.tenants)) {
        const [id] = await store.redis.zpopmin(schedulerKeys.ready(tenant));
        if (!id) continue;
        const task = await store.get(id);
        if (task?.kind !== 'tool' || task.status !== 'queued') continue;
        found = true;
        const p = runOne(task).finally(() => running.delete(p));
        running.add(p);
      }
      if (!found) await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return {
    async stop() {
      stopping = true;
      await loop;
      await Promise.allSettled(running);
      await runner.close();
      close();
    },
  };
}

/** Redis, one replica and one worker with the conformance tools. */
export async function startStack(): Promise<{ redis: RedisServer; replica: Replica; stop(): Promise<void> }> {
  const redis = await startRedis();
  const replica = await startReplica(redis.url);
  // The same pack the router lists when TASKLINE_MCP_CONFORMANCE_TOOLS is on.
  const worker = startToolWorker(redis.url, registerConformanceTools(new ToolRegistry()));
  return {
    redis,
    replica,
    async stop() {
      await worker.stop();
      await replica.close();
      await redis.stop();
    },
  };
}
