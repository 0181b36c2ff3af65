// What both worker services do alike as processes: exit when the control plane refuses them, and answer `/readyz`.
import { redisAnswers } from '@taskline/engine';
import { createLogger } from '@taskline/log';
import type { Redis } from 'ioredis';

/**
 * A scheduler refused this worker for good (no accepted credential, or its id is a live
 * worker's): one error line, on stderr as a failed start's, and exit 1; trying on would not help.
 */
export function exitRefused(service: string, worker: string, message: string): void {
  const log = createLogger({ service, worker }, 'error', (line) => process.stderr.write(`${line}\n`));
  log.error('control_refused', { message });
  process.exit(1);
}

/**
 * A worker's `/readyz`: ready once a scheduler has registered it (slots no scheduler counts take no
 * work) and Redis answers; otherwise why not.
 */
export function workerReadiness(worker: () => { registered: boolean } | null, redis: Redis) {
  return async (): Promise<string | null> => {
    if (!worker()?.registered) return 'not registered with a scheduler';
    return (await redisAnswers(redis)) ? null : 'Redis is unreachable';
  };
}

/** What a worker process holds open besides its queues: closed in this order once it has drained. */
export interface WorkerResources {
  metricsServer: { close(): Promise<void> };
  metrics: { close(): void };
  hub: { close(): void };
  redis: Redis;
  tracing: { shutdown(): Promise<void> };
}

/** Closes a drained worker's metrics listener, hub, Redis and tracing (its spans flushed), then exits 0. */
export async function closeAndExit(r: WorkerResources): Promise<void> {
  await r.metricsServer.close();
  r.metrics.close();
  r.hub.close();
  r.redis.disconnect();
  await r.tracing.shutdown();
  process.exit(0);
}
