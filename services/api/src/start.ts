// Starts the api service from the environment.
import { loadEnv } from '@taskline/config';
import { startTracing } from '@taskline/tracing';
import { JobQueues } from '@taskline/control';
import { connectQueueRedis, openServiceRedis, timeRedisCommands } from '@taskline/engine';
import { createLogger, droppedLogLines, exitOnStartFailure } from '@taskline/log';
import type { McpExtensions } from '@taskline/mcp';
import { buildInfo, createMetrics, startMetricsServer } from '@taskline/metrics';
import { createApp } from './app.js';
import { serve } from './server.js';

/**
 * Starts the `api` service: LMSP 1.0 and MCP over HTTP. Stateless; run as many replicas as needed
 * on one Redis. `main.ts` runs it as deployed; a test entry may add `/mcp` extensions.
 */
export function startApi(options: { mcpExtensions?: McpExtensions } = {}): void {
  exitOnStartFailure('api', () => main(options.mcpExtensions));
}

async function main(mcpExtensions: McpExtensions | undefined): Promise<void> {
  const env = loadEnv();
  const build = buildInfo(new URL('../package.json', import.meta.url), env.TASKLINE_BUILD_REVISION);
  const tracing = await startTracing('taskline-api');
  const logger = createLogger({ service: 'api', pid: process.pid }, env.TASKLINE_LOG_LEVEL, {
    bufferBytes: env.TASKLINE_LOG_BUFFER_BYTES,
  });
  const { redis, target } = await openServiceRedis(env, 'taskline-api', logger, {
    commandTimeout: env.TASKLINE_REDIS_COMMAND_TIMEOUT_MS,
  });
  if (env.TASKLINE_MCP_LOCAL_NO_AUTH) {
    logger.warn('TASKLINE_MCP_LOCAL_NO_AUTH=1: /mcp accepts every caller as the tenant "local"');
  }
  const metrics = createMetrics({
    service: 'api',
    tenantTopN: env.TASKLINE_METRICS_TENANT_TOP_N,
    logLinesDropped: droppedLogLines,
    build,
    exemplars: tracing.exemplar,
  });
  timeRedisCommands(redis, (command, s) => metrics.redisCommandDurationSeconds.observe({ command }, s));
  // The queues a create on a lent slot hands its task to (one connection for all, opened on first use).
  const jobs = new JobQueues(() => connectQueueRedis(target, 'taskline-api-queue'));
  const api = createApp({ env, redis, logger, metrics, mcpExtensions, build, jobs });
  // Metrics on a listener of their own, bound as the scheduler's and worker's are: they name the
  // busiest tenants, so only the scraper may reach them, never the clients of the api port.
  const metricsServer = await startMetricsServer({
    metrics,
    port: env.TASKLINE_METRICS_PORT,
    host: env.TASKLINE_HOST,
    keepAliveMs: env.TASKLINE_HTTP_KEEPALIVE_MS,
  });
  const running = await serve(
    api,
    env.TASKLINE_HOST,
    env.TASKLINE_PORT,
    logger.child({ metrics_port: metricsServer.port }),
    env.TASKLINE_HTTP_KEEPALIVE_MS,
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
        await jobs.close().catch(() => undefined);
        redis.disconnect();
        await tracing.shutdown();
        process.exit(0);
      });
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}
