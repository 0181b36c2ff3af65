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
