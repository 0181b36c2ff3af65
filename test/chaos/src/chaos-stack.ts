/**
 * The chaos run's stack, the local production shape (`pnpm cluster`'s): Redis with AOF, two api
 * replicas behind HAProxy (deploy/haproxy/haproxy.cfg), two schedulers, two gpu-workers and two tool
 * workers (serving the conformance fixtures' tool module), each a process of `@taskline/testing`'s
 * stack whose PID the run holds; logs in test/chaos/report/logs. On one
 * Redis, both workers, api-1 and scheduler-1 reach it through a proxy whose connections the
 * faults drop; worker-2's clock runs WORKER_SKEW_MS off the machine's for the whole run.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { connectRedis, TaskStore } from '@taskline/engine';
import {
  freePort,
  startHaproxy,
  startRedis,
  skewedClock,
  startRedisCluster,
  startServices,
  type ApiService,
  type RedisCluster,
  type RedisServer,
  type Service,
  type Stack,
} from '@taskline/testing';
import { FIXTURE_ENTRIES, FIXTURE_TOOL_MODULE } from '@taskline/test-support/entries';
import { API_KEYS } from './client.js';
import { LOG_DIR, ON_CLUSTER } from './observed.js';
import { startProxyProcess, type ChaosProxy } from './proxy.js';
import * as tools from './tools.js';
import { ROLLING_DRAIN_MS } from './visible.js';
import { WEBHOOK_CHAOS_ENV } from './webhooks.js';

/** worker-2's clock: 5 s behind the machine's (and Redis's), as on a host whose time sync failed. */
export const WORKER_SKEW_MS = -5000;

export interface ChaosStack {
  stack: Stack<RedisServer | RedisCluster>;
  /** One Redis with AOF, or (ON_CLUSTER) 3 primaries and 3 replicas with AOF. */
  redis: RedisServer | RedisCluster;
  /**
   * In front of the one Redis for both workers, api-1 and scheduler-1 (the others connect
   * directly, so each role has a replica through it and one without). Null on a Redis Cluster: a
   * proxy fronts one node, and cluster clients connect to the nodes CLUSTER SLOTS names.
   */
  proxy: ChaosProxy | null;
  /** For the checks: reads every task the run acknowledged. */
  store: TaskStore;
  apis: ApiService[];
  schedulers: Service[];
  workers: Service[];
  /** Tool-worker processes serving `worker_steps` and `worker_steps_retry` (worker-tools.ts). */
  toolWorkers: Service[];
  haproxy: ChildProcess;
  lb: string;
}

/** Starts every process (each start gives up after 120 s); a cluster that does not come up is stopped. */
export async function startChaosStack(): Promise<ChaosStack> {
  mkdirSync(LOG_DIR, { recursive: true });
  const stack = await startServices<RedisServer | RedisCluster>({
    redis: ON_CLUSTER ? () => startRedisCluster() : () => startRedis(),
    schedulers: 0,
    logDir: LOG_DIR,
    env: {
      TASKLINE_LEASE_MS: '1500',
      ...tools.TOOL_CHAOS_ENV,
      ...WEBHOOK_CHAOS_ENV,
    },
    // The MCP load calls the conformance suite's fixture tools (slow_compute, confirm_delete).
    entries: FIXTURE_ENTRIES,
  });
  let proxy: ChaosProxy | null = null;
  try {
    proxy = ON_CLUSTER ? null : await startProxyProcess(stack.redis.url);
    // The env that points a process at Redis through the proxy (the stack's URL otherwise).
    const proxied = (yes: boolean): Record<string, string> => (proxy && yes ? { REDIS_URL: proxy.url } : {});
    for (let i = 1; i <= 2; i++)
      stack.scheduler(
        await freePort(),
        {
          TASKLINE_HEARTBEAT_MS: '200',
          TASKLINE_DISPATCH_INTERVAL_MS: '50',
          TASKLINE_LEADER_LEASE_MS: '1500',
          TASKLINE_RECOVERY_INTERVAL_MS: '500',
          TASKLINE_RECONCILE_AFTER_MS: '2000',
          TASKLINE_WORKER_TIMEOUT_MS: '2000',
          ...proxied(i === 1),
        },
        { name: `scheduler-${i}` },
      );
    for (let i = 1; i <= 2; i++)
      stack.worker(
        {
          TASKLINE_WORKER_ID: `chaos-worker-${i}`,
          // The benchmark model: fixed output, slowed so that kills land mid-generation.
          TASKLINE_WORKER_MODELS: 'instant',
          TASKLINE_WORKER_SLOTS: '4',
          TASKLINE_WORKER_MIN_STEP_MS: '60',
          TASKLINE_HEARTBEAT_MS: '200',
          TASKLINE_DRAIN_DEADLINE_MS: ROLLING_DRAIN_MS,
          ...proxied(true),
          ...(i === 2 ? skewedClock(WORKER_SKEW_MS) : {}),
        },
        { name: `worker-${i}` },
      );
    for (let i = 1; i <= 2; i++)
      stack.toolWorker(
        FIXTURE_TOOL_MODULE,
        {
          TASKLINE_WORKER_ID: `chaos-tool-worker-${i}`,
          TASKLINE_HEARTBEAT_MS: '200',
          TASKLINE_DRAIN_DEADLINE_MS: ROLLING_DRAIN_MS,
          ...proxied(i === 1),
        },
        { name: `tool-worker-${i}` },
      );
    const apiEnv = {
      TASKLINE_API_KEYS: API_KEYS,
      TASKLINE_MODELS: 'instant',
      TASKLINE_SNAPSHOT_MODELS: 'instant',
      TASKLINE_SSE_HEARTBEAT_MS: '1000',
      TASKLINE_RATE_LIMIT_PER_S: '200',
      TASKLINE_RATE_LIMIT_BURST: '300',
      TASKLINE_MAX_UNFINISHED_TASKS: '80',
      TASKLINE_IDEMPOTENCY_PENDING_MS: '3000',
    };
    for (let i = 1; i <= 2; i++)
      stack.api(await freePort(), { ...apiEnv, ...proxied(i === 1) }, { name: `api-${i}` });
    const { schedulers, workers, toolWorkers, apis } = stack;
    await Promise.all([...schedulers, ...workers, ...toolWorkers, ...apis].map((s) => s.up));
    const { child: haproxy, lb } = await startHaproxy([apis[0]!.port, apis[1]!.port], {
      log: join(LOG_DIR, 'haproxy.log'),
    });
    const store = new TaskStore(connectRedis(stack.redis.url, 'chaos-inspect'), {
      taskRetentionMs: 3_600_000,
      eventRetentionMs: 3_600_000,
      idempotencyTtlS: 86_400,
      idempotencyPendingMs: 30_000,
    });
    store.redis.on('error', () => undefined);
    return { stack, redis: stack.redis, proxy, store, apis, schedulers, workers, toolWorkers, haproxy, lb };
  } catch (err) {
    proxy?.close();
    await stack.stop();
    throw err;
  }
}

/** Kills every process of the cluster and removes Redis's folder. */
export async function stopChaosStack(c: ChaosStack): Promise<void> {
  c.haproxy.kill('SIGKILL');
  c.store.redis.disconnect();
  await c.stack.stop();
  c.proxy?.close();
}
