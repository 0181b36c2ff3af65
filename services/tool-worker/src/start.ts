// Starts a tool worker: checks its tools, then serves them from their queues and keeps them announced.
import { randomUUID } from 'node:crypto';
import { startTracing } from '@taskline/tracing';
import { loadEnv, type Env } from '@taskline/config';
import {
  callbackSettingsFromEnv,
  EventHub,
  openServiceRedis,
  type RunContext,
  servedModelsFromEnv,
  storeOptionsFromEnv,
  TaskStore,
  timeRedisCommands,
} from '@taskline/engine';
import { createLogger, droppedLogLines, type Logger } from '@taskline/log';
import { controlSecurityFromEnv } from '@taskline/control';
import { buildInfo, createMetrics, startMetricsServer, type TasklineMetrics } from '@taskline/metrics';
import {
  closeAndExit,
  exitRefused,
  TaskWorker,
  workerReadiness,
  type TaskWorkerOptions,
} from '@taskline/task-worker';
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
import { listedName, type UpstreamConfig } from './upstreams/config.js';
import { startGateway, type Gateway } from './upstreams/gateway.js';

export interface ToolWorkerOptions {
  /** The tools to serve (`loadToolModule` reads them from a module). */
  tools: ToolDefinition[];
  /** Upstream MCP servers whose tools it serves beside `tools` (docs/gateway.md). */
  upstreams?: UpstreamConfig[];
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
 * Keeps this worker's registry entry alive (every third of its TTL) until `stop`, and its tools
 * deployed for `retainMs` past each refresh; a failed refresh is logged and retried at the next
 * tick: the TTL leaves two of them before the entry lapses. `stop` leaves the deployment.
 */
function keepAnnounced(live: LiveTools, entry: () => LiveWorkerEntry, env: Env, log: Logger) {
  const ttlMs = env.TASKLINE_TOOL_REGISTRY_TTL_MS;
  const retainMs = env.TASKLINE_TOOL_DEPLOYED_RETENTION_MS;
  const announce = () =>
    live
      .announce(entry(), ttlMs, retainMs)
      .catch((err: unknown) => log.warn('announce_failed', { error: err }));
  const timer = setInterval(announce, Math.max(100, Math.floor(ttlMs / 3)));
  return {
    first: live.announce(entry(), ttlMs, retainMs),
    stop: async () => {
      clearInterval(timer);
      await live.withdraw(entry().worker).catch(() => undefined);
    },
  };
}

/**
 * The gateway tools an upstream no longer lists (`notifications/tools/list_changed`): left out of
 * the announcement from its next refresh. A tool an upstream adds is served after a restart: a
 * worker's queues are fixed when it starts (docs/gateway.md).
 */
function followUpstreamTools(gateway: Gateway | undefined, log: Logger): Set<string> {
  const withdrawn = new Set<string>();
  for (const upstream of gateway?.upstreams ?? []) {
    const mine = [...gateway!.owners].filter(([, u]) => u === upstream).map(([name]) => name);
    upstream.onToolsChanged = (listed) => {
      const now = new Set(listed.map((t) => listedName(upstream.config, t.name)));
      for (const name of mine)
        if (now.has(name)) withdrawn.delete(name);
        else withdrawn.add(name);
      log.info('upstream_tools_changed', { upstream: upstream.config.name, withdrawn: [...withdrawn] });
    };
  }
  return withdrawn;
}

/** The upstreams' tools, connected and listed (docs/gateway.md); none without upstreams. */
async function gatewayOf(options: ToolWorkerOptions, env: Env, log: Logger, metrics: TasklineMetrics) {
  if (!options.upstreams?.length) return undefined;
  return startGateway(options.upstreams, {
    env: options.env ?? process.env,
    timeoutMs: env.TASKLINE_UPSTREAM_TIMEOUT_MS,
    maxResultBytes: env.TASKLINE_UPSTREAM_MAX_RESULT_BYTES,
    log,
    onUpstreamState: (upstream, up) => metrics.upstreamUp.set({ upstream }, up ? 1 : 0),
  });
}

/**
 * Every tool this worker serves: the module's and the upstreams', checked, and `listed()`, the
 * registry entries of those still offered (an upstream may withdraw a tool).
 */
async function servedTools(options: ToolWorkerOptions, env: Env, log: Logger, metrics: TasklineMetrics) {
  const gateway = await gatewayOf(options, env, log, metrics);
  const tools = [...options.tools, ...(gateway?.tools ?? [])];
  const checked = checkTools(tools, env.TASKLINE_TOOL_VERSION, gateway?.schemas);
  // The deployment's TASKLINE_TOOL_CONCURRENCY (a chart pool's `concurrency`), when set, wins.
  const slots = new Map(tools.map((t) => [t.name, env.TASKLINE_TOOL_CONCURRENCY || (t.concurrency ?? 1)]));
  const withdrawn = followUpstreamTools(gateway, log);
  const listed = () =>
    checked
      .filter((t) => !withdrawn.has(t.name))
      .map((t): LiveToolEntry => ({ ...t, slots: slots.get(t.name)! }));
  return { gateway, tools, checked, listed, withdrawn, slots };
}

/** A tool task's attempt: `running` first (a tool has nothing to load), then the tool. */
const runTool = (runner: ToolRunner) => async (ctx: RunContext) => {
  if (ctx.task.status !== 'running') await ctx.store.start(ctx.task.id, ctx.attempt, ctx.task.shownStatus);
  return runner.run(ctx);
};

/** Runs the calls of every tool served, each tool from its own queue. */
function toolRunnerOf(tools: ToolDefinition[], env: Env, deps: { hub: EventHub; log: Logger }): ToolRunner {
  const registry = new ToolRegistry();
  for (const tool of tools) registry.register(tool, { queue: toolQueue(tool.name) });
  return createToolRunner(registry, {
    ...deps,
    served: servedModelsFromEnv(env),
    checkpointMaxBytes: env.TASKLINE_TOOL_CHECKPOINT_MAX_BYTES,
    callbacks: callbackSettingsFromEnv(env),
  });
}

/** What the worker takes from start-up rather than from the environment; `exit` runs once it has drained. */
type WorkerDeps = Pick<
  TaskWorkerOptions,
  'id' | 'redisTarget' | 'store' | 'log' | 'metrics' | 'controlSecurity'
> & {
  tools: ToolDefinition[];
  slots: Map<string, number>;
  runner: ToolRunner;
  exit: () => Promise<void>;
};

/** The worker taking the tools' queues, each with its slots. */
function toolTaskWorker(env: Env, { tools, slots, runner, exit, ...deps }: WorkerDeps): TaskWorker {
  return new TaskWorker({
    ...deps,
    queues: tools.map((t) => ({ model: toolQueue(t.name), slots: slots.get(t.name)! })),
    fetchers: 1,
    run: runTool(runner),
    startsRunning: () => true,
    leaseMs: env.TASKLINE_LEASE_MS,
    schedulerAddrs: env.TASKLINE_SCHEDULER_ADDR.split(','),
    onControlRefused: (message) => exitRefused('tool-worker', deps.id, message),
    onDrained: () => void exit(),
  });
}

/**
 * Starts a tool worker in this process; resolves once it takes work. Every tool is checked before
 * anything connects: an invalid one throws (InvalidToolError), and nothing is registered or claimed.
 * SIGTERM drains within TASKLINE_DRAIN_DEADLINE_MS, SIGINT at once; the process exits once drained.
 */
export async function startToolWorker(options: ToolWorkerOptions): Promise<ToolWorker> {
  const env = loadEnv(options.env);
  checkTools(options.tools, env.TASKLINE_TOOL_VERSION);
  // Before Redis: a worker with no control-plane credential would only be refused.
  const security = controlSecurityFromEnv(env, 'worker');
  const build = buildInfo(new URL('../package.json', import.meta.url), env.TASKLINE_BUILD_REVISION);
  const tracing = await startTracing('taskline-tool-worker', options.env);
  const id = env.TASKLINE_WORKER_ID || `tool-worker-${randomUUID().slice(0, 8)}`;
  const log = createLogger({ service: 'tool-worker', worker: id }, env.TASKLINE_LOG_LEVEL, {
    bufferBytes: env.TASKLINE_LOG_BUFFER_BYTES,
  });
  const { target: redisTarget, redis } = await openServiceRedis(env, id, log);
  const metrics = createMetrics({
    service: 'tool-worker',
    tenantTopN: env.TASKLINE_METRICS_TENANT_TOP_N,
    logLinesDropped: droppedLogLines,
    build,
    exemplars: tracing.exemplar,
  });
  timeRedisCommands(redis, (command, s) => metrics.redisCommandDurationSeconds.observe({ command }, s));
  const { gateway, tools, checked, listed, withdrawn, slots } = await servedTools(options, env, log, metrics);
  const store = new TaskStore(redis, { ...storeOptionsFromEnv(env), onTransition: metrics.transitioned });
  const hub = new EventHub(store);
  let worker: TaskWorker | null = null;
  const metricsServer = await startMetricsServer({
    metrics,
    port: env.TASKLINE_METRICS_PORT,
    host: env.TASKLINE_HOST,
    keepAliveMs: env.TASKLINE_HTTP_KEEPALIVE_MS,
    probes: { build, notReady: workerReadiness(() => worker, redis) },
  });

  const runner = toolRunnerOf(tools, env, { hub, log });
  const startedAt = Date.now();
  const entry = (): LiveWorkerEntry => ({
    worker: id,
    tenants: tenantsOf(env),
    startedAt,
    heartbeatAt: Date.now(),
    tools: listed(),
    withdrawn: [...withdrawn],
  });
  const live = new LiveTools(redis, { cacheMs: 0 });
  let announced: ReturnType<typeof keepAnnounced> | null = null;

  const exit = async () => {
    const own = {
      announcement: async () => announced?.stop(),
      gateway: async () => gateway?.close(),
      runner: () => runner.close(),
    };
    await closeAndExit({ own, metricsServer, metrics, hub, redis, tracing }, log);
  };
  const deps = { id, redisTarget, store, log, metrics, tools, slots, runner, exit };
  worker = toolTaskWorker(env, { ...deps, controlSecurity: security });
  const running = worker;
  await running.start();
  // Listed once it takes work: a call accepted on its word is never left without a taker.
  announced = keepAnnounced(live, entry, env, log);
  await announced.first;
  const drain = (deadlineMs: number) => {
    // Out of the live workers at once; its tools stay deployed, so new calls queue for the next.
    void announced?.stop();
    return running.drain(deadlineMs);
  };
  process.on('SIGTERM', () => void drain(env.TASKLINE_DRAIN_DEADLINE_MS));
  process.on('SIGINT', () => void drain(0));
  log.info('ready', {
    tools: checked.map((t) => `${t.name}@${t.version}`).join(','),
    metrics_port: metricsServer.port,
  });
  return { id, drain };
}
