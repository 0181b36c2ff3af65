// Starts a tool worker: checks its tools, then serves them from their queues and keeps them announced.
import { randomUUID } from 'node:crypto';
import { startTracing } from '@taskline/tracing';
import { loadEnv, type Env } from '@taskline/config';
import {
  connectRedis,
  EventHub,
  redisTargetFromEnv,
  servedModelsFromEnv,
  storeOptionsFromEnv,
  TaskStore,
  type RunContext,
} from '@taskline/engine';
import { createLogger, droppedLogLines, type Logger } from '@taskline/log';
import { createMetrics, startMetricsServer } from '@taskline/metrics';
import { TaskWorker } from '@taskline/task-worker';
import type { ToolDefinition } from '@taskline/tool-sdk';
import {
  createToolRunner,
  LiveTools,
  toolQueue,
  ToolRegistry,
  type LiveToolEntry,
  type LiveWorkerEntry,
  type ToolRunner,
} from '@taskline/tools';
import { checkTools } from './load.js';

export interface ToolWorkerOptions {
  /** The tools to serve (`loadToolModule` reads them from a module). */
  tools: ToolDefinition[];
  /** Settings; `process.env` by default (TASKLINE_TOOL_TENANTS, TASKLINE_TOOL_VERSION, REDIS_URL...). */
  env?: NodeJS.ProcessEnv;
}

export interface ToolWorker {
  id: string;
  /** Stops taking work, lets running tasks finish until `deadlineMs`, hands back the rest; then exits. */
  drain(deadlineMs: number): Promise<void>;
}

/** `*` or the tenants of TASKLINE_TOOL_TENANTS. */
const tenantsOf = (env: Env): LiveWorkerEntry['tenants'] =>
  env.TASKLINE_TOOL_TENANTS === '*' ? '*' : env.TASKLINE_TOOL_TENANTS.split(',');

/**
 * Keeps this worker's registry entry alive (every third of its TTL) until `stop`; a failed refresh
 * is logged and retried at the next tick: the TTL leaves two of them before the entry lapses.
 */
function keepAnnounced(live: LiveTools, entry: () => LiveWorkerEntry, ttlMs: number, log: Logger) {
  const announce = () =>
    live.announce(entry(), ttlMs).catch((err: unknown) => log.warn('announce_failed', { error: err }));
  const timer = setInterval(announce, Math.max(100, Math.floor(ttlMs / 3)));
  return {
    first: live.announce(entry(), ttlMs),
    stop: async () => {
      clearInterval(timer);
      await live.withdraw(entry().worker).catch(() => undefined);
    },
  };
}

/** A tool task's attempt: `running` first (a tool has nothing to load), then the tool. */
const runTool = (runner: ToolRunner) => async (ctx: RunContext) => {
  if (ctx.task.status !== 'running') await ctx.store.start(ctx.task.id, ctx.attempt, ctx.task.shownStatus);
  return runner.run(ctx);
};

/**
 * Starts a tool worker in this process; resolves once it takes work. Every tool is checked before
 * anything connects: an invalid one throws (InvalidToolError), and nothing is registered or claimed.
 * SIGTERM drains within TASKLINE_DRAIN_DEADLINE_MS, SIGINT at once; the process exits once drained.
 */
export async function startToolWorker(options: ToolWorkerOptions): Promise<ToolWorker> {
  const env = loadEnv(options.env);
  const tracing = startTracing('taskline-tool-worker', options.env);
  const checked = checkTools(options.tools, env.TASKLINE_TOOL_VERSION);
  const id = env.TASKLINE_WORKER_ID || `tool-worker-${randomUUID().slice(0, 8)}`;
  const log = createLogger({ service: 'tool-worker', worker: id }, env.TASKLINE_LOG_LEVEL, {
    bufferBytes: env.TASKLINE_LOG_BUFFER_BYTES,
  });
  const redisTarget = redisTargetFromEnv(env);
  const redis = connectRedis(redisTarget, id);
  redis.on('error', (err) => log.warn('redis connection error', { err }));
  const metrics = createMetrics({
    service: 'tool-worker',
    tenantTopN: env.TASKLINE_METRICS_TENANT_TOP_N,
    logLinesDropped: droppedLogLines,
  });
  const store = new TaskStore(redis, { ...storeOptionsFromEnv(env), onTransition: metrics.transitioned });
  const hub = new EventHub(store);
  const metricsServer = await startMetricsServer({
    metrics,
    port: env.TASKLINE_METRICS_PORT,
    host: env.TASKLINE_HOST,
  });

  const registry = new ToolRegistry();
  for (const tool of options.tools) registry.register(tool, { queue: toolQueue(tool.name) });
  const runner = createToolRunner(registry, {
    hub,
    served: servedModelsFromEnv(env),
    log,
    checkpointMaxBytes: env.TASKLINE_TOOL_CHECKPOINT_MAX_BYTES,
  });
  const slots = new Map(options.tools.map((t) => [t.name, t.concurrency ?? 1]));
  const startedAt = Date.now();
  const entry = (): LiveWorkerEntry => ({
    worker: id,
    tenants: tenantsOf(env),
    startedAt,
    heartbeatAt: Date.now(),
    tools: checked.map((t): LiveToolEntry => ({ ...t, slots: slots.get(t.name)! })),
  });
  const live = new LiveTools(redis, { cacheMs: 0 });
  let announced: ReturnType<typeof keepAnnounced> | null = null;

  const exit = async () => {
    await announced?.stop();
    await runner.close();
    await metricsServer.close();
    metrics.close();
    hub.close();
    redis.disconnect();
    await tracing.shutdown();
    process.exit(0);
  };
  const worker = new TaskWorker({
    id,
    redisTarget,
    store,
    log,
    metrics,
    queues: options.tools.map((t) => ({ model: toolQueue(t.name), slots: slots.get(t.name)! })),
    fetchers: 1,
    run: runTool(runner),
    startsRunning: () => true,
    leaseMs: env.TASKLINE_LEASE_MS,
    schedulerAddrs: env.TASKLINE_SCHEDULER_ADDR.split(','),
    onDrained: () => void exit(),
  });
  await worker.start();
  // Listed once it takes work: a call accepted on its word is never left without a taker.
  announced = keepAnnounced(live, entry, env.TASKLINE_TOOL_REGISTRY_TTL_MS, log);
  await announced.first;
  const drain = (deadlineMs: number) => {
    // Out of every list at once: new calls are refused as unknown while running ones finish.
    void announced?.stop();
    return worker.drain(deadlineMs);
  };
  process.on('SIGTERM', () => void drain(env.TASKLINE_DRAIN_DEADLINE_MS));
  process.on('SIGINT', () => void drain(0));
  log.info('ready', {
    tools: checked.map((t) => `${t.name}@${t.version}`).join(','),
    metrics_port: metricsServer.port,
  });
  return { id, drain };
}
