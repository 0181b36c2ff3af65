// Starts the gpu-worker service from the environment; resolves once it is ready.
import { randomUUID } from 'node:crypto';
import { startTracing } from '@taskline/tracing';
import { join } from 'node:path';
import { loadEnv, type Env } from '@taskline/config';
import { controlSecurityFromEnv } from '@taskline/control';
import {
  EventHub,
  openServiceRedis,
  servedModelsFromEnv,
  storeOptionsFromEnv,
  TaskStore,
  timeRedisCommands,
} from '@taskline/engine';
import {
  createInstantBackend,
  estimateOnnxModelBytes,
  loadOnnxModelInThread,
  ModelCache,
  type ModelBackend,
} from '@taskline/inference';
import { createLogger, droppedLogLines, type Logger } from '@taskline/log';
import { buildInfo, createMetrics, startMetricsServer, type TasklineMetrics } from '@taskline/metrics';
import {
  builtinTools,
  createToolRunner,
  modelChoice,
  type BuiltinToolOptions,
  type ToolRunner,
} from '@taskline/tools';
import { closeAndExit, exitRefused, workerReadiness } from '@taskline/task-worker';
import { GpuWorker, type GpuWorkerOptions } from './worker.js';

/** Benchmark-only model id: no weights, fixed output as fast as the pipeline allows. */
const INSTANT_MODEL = 'instant';

/**
 * Starts the `gpu-worker` service; resolves once it is ready. `main.ts` runs it as deployed; a test
 * entry may register more tools, the same ones its api lists.
 */
export async function startWorker(
  options: { extendTools?: BuiltinToolOptions['extend'] } = {},
): Promise<void> {
  const env = loadEnv();
  // Before Redis: a worker with no control-plane credential would only be refused.
  const security = controlSecurityFromEnv(env, 'worker');
  const build = buildInfo(new URL('../package.json', import.meta.url), env.TASKLINE_BUILD_REVISION);
  const tracing = await startTracing('taskline-worker');
  const id = env.TASKLINE_WORKER_ID || `worker-${randomUUID().slice(0, 8)}`;
  const log = createLogger({ service: 'gpu-worker', worker: id }, env.TASKLINE_LOG_LEVEL, {
    bufferBytes: env.TASKLINE_LOG_BUFFER_BYTES,
  });
  const { target: redisTarget, redis } = await openServiceRedis(env, id, log);
  const metrics = createMetrics({
    service: 'gpu-worker',
    tenantTopN: env.TASKLINE_METRICS_TENANT_TOP_N,
    logLinesDropped: droppedLogLines,
    build,
    exemplars: tracing.exemplar,
  });
  timeRedisCommands(redis, (command, s) => metrics.redisCommandDurationSeconds.observe({ command }, s));
  const store = new TaskStore(redis, { ...storeOptionsFromEnv(env), onTransition: metrics.transitioned });
  const hub = new EventHub(store);
  let worker: GpuWorker | null = null;
  const metricsServer = await startMetricsServer({
    metrics,
    port: env.TASKLINE_METRICS_PORT,
    host: env.TASKLINE_HOST,
    keepAliveMs: env.TASKLINE_HTTP_KEEPALIVE_MS,
    // Ready once registered with a scheduler: slots no scheduler counts take no work.
    probes: {
      build,
      notReady: workerReadiness(() => worker, redis),
    },
  });
  const cache = modelCache(env, metrics);
  const toolRunner = toolRunnerOf(env, options.extendTools, { hub, log });

  let exiting = false;
  const exit = async () => {
    if (exiting) return;
    exiting = true;
    const own = { 'tool runner': () => toolRunner.close(), 'model cache': () => cache.clear() };
    await closeAndExit({ own, metricsServer, metrics, hub, redis, tracing }, log);
  };

  const deps = { id, redisTarget, store, log, metrics, cache, toolRunner, exit };
  worker = gpuWorker(env, { ...deps, controlSecurity: security });
  await worker.start();
  log.info('ready', {
    models: env.TASKLINE_WORKER_MODELS,
    slots: env.TASKLINE_WORKER_SLOTS,
    metrics_port: metricsServer.port,
  });

  const running = worker;
  process.on('SIGTERM', () => void running.drain(env.TASKLINE_DRAIN_DEADLINE_MS));
  process.on('SIGINT', () => void running.drain(0));
}

/** The models this worker loads, within its memory budget; each real load is timed. */
function modelCache(env: Env, metrics: TasklineMetrics): ModelCache<ModelBackend> {
  const providers =
    env.TASKLINE_EXECUTION_PROVIDER === 'cuda' ? (['cuda', 'cpu'] as const) : (['cpu'] as const);
  return new ModelCache<ModelBackend>({
    budgetBytes: env.TASKLINE_MODEL_MEMORY_MB * 1024 * 1024,
    estimateBytes: (model) =>
      model === INSTANT_MODEL ? 0 : estimateOnnxModelBytes(join(env.TASKLINE_MODELS_DIR, model)),
    // Timed here, where a model is really loaded: a cache hit is no model load.
    load: async (model) => {
      const started = process.hrtime.bigint();
      const backend =
        model === INSTANT_MODEL
          ? createInstantBackend({ minStepMs: env.TASKLINE_WORKER_MIN_STEP_MS })
          : // Off the event loop: onnxruntime-node runs a session synchronously on its caller's thread.
            await loadOnnxModelInThread(join(env.TASKLINE_MODELS_DIR, model), {
              id: model,
              executionProviders: [...providers],
              intraOpThreads: env.TASKLINE_INTRA_OP_THREADS || undefined,
              prefillChunkTokens: env.TASKLINE_PREFILL_CHUNK_TOKENS,
              minStepMs: env.TASKLINE_WORKER_MIN_STEP_MS,
            });
      metrics.modelLoadSeconds.observe({ model }, Number(process.hrtime.bigint() - started) / 1e9);
      return backend;
    },
  });
}

/** Runs built-in tool calls: the same registry the api lists (the api accepts a call, a worker runs it). */
function toolRunnerOf(
  env: Env,
  extendTools: BuiltinToolOptions['extend'],
  deps: { hub: EventHub; log: Logger },
): ToolRunner {
  const tools = builtinTools({
    extend: extendTools,
    batchConfirmAboveTokens: env.TASKLINE_BATCH_CONFIRM_ABOVE_TOKENS,
    models: modelChoice(env),
  });
  return createToolRunner(tools, {
    ...deps,
    served: servedModelsFromEnv(env),
    checkpointMaxBytes: env.TASKLINE_TOOL_CHECKPOINT_MAX_BYTES,
  });
}

/** What the worker takes from start-up rather than from the environment; `exit` runs once it has drained. */
type WorkerDeps = Pick<
  GpuWorkerOptions,
  'id' | 'redisTarget' | 'store' | 'log' | 'metrics' | 'toolRunner' | 'controlSecurity'
> & { cache: ModelCache<ModelBackend>; exit: () => Promise<void> };

/** The worker itself, configured from the environment. */
function gpuWorker(env: Env, { cache, exit, ...deps }: WorkerDeps): GpuWorker {
  return new GpuWorker({
    ...deps,
    models: env.TASKLINE_WORKER_MODELS.split(','),
    slots: env.TASKLINE_WORKER_SLOTS,
    fetchers: env.TASKLINE_WORKER_FETCHERS,
    acquire: (model) => cache.acquire(model),
    isLoaded: (model) => cache.isLoaded(model),
    leaseMs: env.TASKLINE_LEASE_MS,
    flushMs: env.TASKLINE_STREAM_FLUSH_MS,
    schedulerAddrs: env.TASKLINE_SCHEDULER_ADDR.split(','),
    onControlRefused: (message) => exitRefused('gpu-worker', deps.id, message),
    onDrained: () => void exit(),
  });
}
