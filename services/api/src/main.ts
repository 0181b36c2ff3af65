import { loadEnv } from '@taskline/config';
import { checkDurability, connectRedis, durabilityFromEnv, timeRedisCommands } from '@taskline/engine';
import { operatorAuthenticator } from '@taskline/auth';
import { mountConsole } from '@taskline/console';
import { createLogger } from '@taskline/log';
import { createMcpRouter } from '@taskline/mcp';
import { createMetrics, startMetricsServer } from '@taskline/metrics';
import { createApp } from './app.js';
import { serve } from './server.js';

/** The `api` service: LMSP 1.0 and MCP over HTTP. Stateless; run as many replicas as needed on one Redis. */
async function main(): Promise<void> {
  const env = loadEnv();
  const logger = createLogger({ service: 'api', pid: process.pid }, env.TASKLINE_LOG_LEVEL);
  const redis = connectRedis(env.REDIS_URL, 'taskline-api');
  redis.on('error', (err) => logger.warn('redis connection error', { err }));
  logger.info('redis durability', await checkDurability(redis, durabilityFromEnv(env), logger));
  if (env.TASKLINE_MCP_LOCAL_NO_AUTH) {
    logger.warn('TASKLINE_MCP_LOCAL_NO_AUTH=1: /mcp accepts every caller as the tenant "local"');
  }
  const metrics = createMetrics({ service: 'api', tenantTopN: env.TASKLINE_METRICS_TENANT_TOP_N });
  timeRedisCommands(redis, (command, s) => metrics.redisCommandDurationSeconds.observe({ command }, s));
  const api = createApp({
    env,
    redis,
    logger,
    metrics,
    mountExtra: (app, { store, hub, auth, limits, models, followTask, streams }) => {
      // The operator console at /console and /admin/v1: operators only, never a tenant credential.
      mountConsole(app, {
        store,
        operators: operatorAuthenticator(env),
        models: [...models.keys()],
        followTask,
        // The overview's stream: counted, capped and ended on shutdown as task streams are.
        live: {
          openStream: (name) => limits.openStream(name),
          register: (stream) => streams.add(stream),
          heartbeatMs: env.TASKLINE_SSE_HEARTBEAT_MS,
          retryMs: env.TASKLINE_SSE_RETRY_MS,
          maxBufferBytes: env.TASKLINE_SSE_MAX_BUFFER_BYTES,
          opened: (delta) => metrics.sseStreamsOpen.inc({ protocol: 'console' }, delta),
        },
        usage: (tenants) => limits.usage(tenants),
        limits: {
          maxActiveTasks: env.TASKLINE_MAX_ACTIVE_TASKS,
          maxStreams: env.TASKLINE_MAX_STREAMS,
          requestBurst: env.TASKLINE_RATE_LIMIT_BURST,
        },
        prometheusUrl: env.TASKLINE_PROMETHEUS_URL,
        retentionMs: env.TASKLINE_TASK_RETENTION_S * 1000,
      });
      // MCP at /mcp on the same engine, with the same authenticator (API keys, JWT) as LMSP.
      app.use(
        '/mcp',
        createMcpRouter({
          store,
          hub,
          env,
          logger: logger.child({ surface: 'mcp' }),
          authenticate: auth.authenticate,
          // The same request rate and unfinished-task cap as LMSP, per tenant.
          limits,
          observe: {
            taskCreated: (tenant) =>
              metrics.taskCreatesTotal.inc({
                protocol: 'mcp',
                tenant: metrics.tenant(tenant),
                outcome: 'accepted',
              }),
            listener: (delta) => {
              metrics.mcpListenersOpen.inc(delta);
              metrics.sseStreamsOpen.inc({ protocol: 'mcp' }, delta);
            },
            unavailable: (reason) => metrics.redisUnavailableTotal.inc({ reason }),
          },
        }),
      );
    },
  });
  // Metrics on a listener of their own, bound as the scheduler's and worker's are: they name the
  // busiest tenants, so only the scraper may reach them, never the clients of the api port.
  const metricsServer = await startMetricsServer({
    metrics,
    port: env.TASKLINE_METRICS_PORT,
    host: env.TASKLINE_HOST,
  });
  const running = await serve(
    api,
    env.TASKLINE_HOST,
    env.TASKLINE_PORT,
    logger.child({ metrics_port: metricsServer.port }),
  );

  const stop = (signal: string) => {
    logger.info('signal', { signal });
    void running
      .shutdown(env.TASKLINE_SHUTDOWN_DEADLINE_MS, env.TASKLINE_SSE_RETRY_MS)
      .catch((err) => logger.error('shutdown failed', { err }))
      .finally(async () => {
        await metricsServer.close().catch(() => undefined);
        metrics.close();
        api.hub.close();
        redis.disconnect();
        process.exit(0);
      });
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}

main().catch((err: unknown) => {
  process.stderr.write(
    JSON.stringify({
      ts: new Date().toISOString(),
      level: 'error',
      msg: 'api failed to start',
      service: 'api',
      err: String(err),
    }) + '\n',
  );
  process.exit(1);
});
