// The scheduler's entry: connects Redis and metrics, runs one replica.
import { randomUUID } from 'node:crypto';
import { startTracing } from '@taskline/tracing';
import { loadEnv, type Env } from '@taskline/config';
import { controlSecurityFromEnv, type ControlSecurity } from '@taskline/control';
import {
  openServiceRedis,
  parseWeights,
  redisAnswers,
  storeOptionsFromEnv,
  TaskStore,
  timeRedisCommands,
} from '@taskline/engine';
import { createLogger, droppedLogLines, exitOnStartFailure } from '@taskline/log';
import { buildInfo, createMetrics, startMetricsServer } from '@taskline/metrics';
import { Scheduler } from './scheduler.js';
import { startWebhooks } from './webhooks.js';

exitOnStartFailure('scheduler', main);

async function main(): Promise<void> {
  const env = loadEnv();
  // Before Redis: a control plane open to any caller is refused at once.
  const security = controlSecurityFromEnv(env, 'scheduler');
  const build = buildInfo(new URL('../package.json', import.meta.url), env.TASKLINE_BUILD_REVISION);
  const tracing = await startTracing('taskline-scheduler');
  const id = `sched-${randomUUID().slice(0, 8)}`;
  const log = createLogger({ service: 'scheduler', scheduler: id }, env.TASKLINE_LOG_LEVEL, {
    bufferBytes: env.TASKLINE_LOG_BUFFER_BYTES,
  });
  const { target: redisTarget, redis } = await openServiceRedis(env, id, log);
  const metrics = createMetrics({
    service: 'scheduler',
    tenantTopN: env.TASKLINE_METRICS_TENANT_TOP_N,
    logLinesDropped: droppedLogLines,
    build,
    exemplars: tracing.exemplar,
  });
  timeRedisCommands(redis, (command, s) => metrics.redisCommandDurationSeconds.observe({ command }, s));
  const store = new TaskStore(redis, { ...storeOptionsFromEnv(env), onTransition: metrics.transitioned });
  let started = false;
  const metricsServer = await startMetricsServer({
    metrics,
    port: env.TASKLINE_METRICS_PORT,
    host: env.TASKLINE_HOST,
    keepAliveMs: env.TASKLINE_HTTP_KEEPALIVE_MS,
    // A standby is ready too: it answers workers with the leader's address.
    probes: {
      build,
      notReady: async () =>
        !started ? 'starting' : (await redisAnswers(redis)) ? null : 'Redis is unreachable',
    },
  });

  const scheduler = new Scheduler({
    id,
    redis,
    redisTarget,
    store,
    log,
    metrics,
    ...schedulerSettings(env, security),
  });
  await scheduler.start();
  const webhooks = env.TASKLINE_WEBHOOKS
    ? startWebhooks({ env, redis, redisTarget, store, log, metrics })
    : null;
  started = true;
  log.info('ready', { control_port: scheduler.controlPort, metrics_port: metricsServer.port });

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info('shutting_down', { signal });
    await scheduler.stop();
    await webhooks?.stop();
    await metricsServer.close();
    metrics.close();
    redis.disconnect();
    await tracing.shutdown();
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

/** The Scheduler's settings from the environment: control plane, loops and fair share. */
function schedulerSettings(env: Env, security: ControlSecurity) {
  return {
    controlSecurity: security,
    controlHost: env.TASKLINE_CONTROL_HOST,
    controlPort: env.TASKLINE_CONTROL_PORT,
    advertise: env.TASKLINE_CONTROL_ADVERTISE,
    leaderLeaseMs: env.TASKLINE_LEADER_LEASE_MS,
    heartbeatMs: env.TASKLINE_HEARTBEAT_MS,
    workerTimeoutMs: env.TASKLINE_WORKER_TIMEOUT_MS,
    dispatchIntervalMs: env.TASKLINE_DISPATCH_INTERVAL_MS,
    recoveryIntervalMs: env.TASKLINE_RECOVERY_INTERVAL_MS,
    reconcileAfterMs: env.TASKLINE_RECONCILE_AFTER_MS,
    indexSweepMs: env.TASKLINE_INDEX_SWEEP_MS,
    fairShare: {
      quantum: env.TASKLINE_DISPATCH_QUANTUM,
      maxRunning: env.TASKLINE_TENANT_MAX_RUNNING,
      weights: parseWeights(env.TASKLINE_TENANT_WEIGHTS),
    },
  };
}
