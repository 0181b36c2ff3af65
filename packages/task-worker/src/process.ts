// What both worker services do alike as processes: exit when the control plane refuses them, and answer `/readyz`.
import { redisAnswers } from '@taskline/engine';
import { createLogger, type Logger } from '@taskline/log';
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
  /** The service's own things to close first (its runner, model cache, gateway), each by a name for the log. */
  own?: Record<string, () => Promise<unknown>>;
  metricsServer: { close(): Promise<void> };
  metrics: { close(): void };
  hub: { close(): void };
  redis: Redis;
  tracing: { shutdown(): Promise<void> };
}

/**
 * How long a drained worker may take to close before it exits all the same: a close that never
 * returns (chaos saw one) must not keep a drained process up, still connected, past every bound.
 */
const CLOSE_BOUND_MS = 5000;

/**
 * Closes a drained worker's own things, metrics listener, hub, Redis and tracing (its spans
 * flushed), then exits 0; past CLOSE_BOUND_MS it exits 0 anyway, logging the step it was on.
 */
export async function closeAndExit(r: WorkerResources, log: Logger): Promise<void> {
  let step = '';
  setTimeout(() => {
    log.warn('close_forced', { step, bound_ms: CLOSE_BOUND_MS });
    process.exit(0);
  }, CLOSE_BOUND_MS);
  const steps: [string, () => unknown][] = [
    ...Object.entries(r.own ?? {}),
    ['metrics listener', () => r.metricsServer.close()],
    ['metrics', () => r.metrics.close()],
    ['hub', () => r.hub.close()],
    ['redis', () => r.redis.disconnect()],
    ['tracing', () => r.tracing.shutdown()],
  ];
  for (const [name, close] of steps) {
    step = name;
    await close();
  }
  process.exit(0);
}
