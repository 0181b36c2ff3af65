/**
 * The retry schedule of a delivery (docs/webhooks.md, "Retries"): attempt n + 1 follows a failed
 * attempt n after min(base * 2^(n-1), cap), jittered by up to a fifth either way, until
 * `maxAttempts` attempts were made; then the delivery is given up (kept for manual redelivery).
 */
export interface RetrySchedule {
  baseMs: number;
  capMs: number;
  maxAttempts: number;
  /** BullMQ's job options that apply it (with `delay` as the worker's backoff strategy). */
  jobOptions(): {
    attempts: number;
    backoff: { type: 'custom' };
    removeOnComplete: { age: number };
    removeOnFail: { age: number };
  };
  /** The wait after failed attempt `made` (1-based), jitter included. */
  delay(made: number): number;
}

/** Jitter: a fifth of the step either way, so endpoints that failed together do not retry together. */
const JITTER = 0.2;
/** Finished jobs are kept a day (failed ones a week): a relay pass run again finds them and adds none. */
const KEEP_DONE_S = 86_400;
const KEEP_FAILED_S = 7 * 86_400;

export function retrySchedule(
  baseMs: number,
  capMs: number,
  maxAttempts: number,
  random = Math.random,
): RetrySchedule {
  return {
    baseMs,
    capMs,
    maxAttempts,
    jobOptions: () => ({
      attempts: maxAttempts,
      backoff: { type: 'custom' },
      removeOnComplete: { age: KEEP_DONE_S },
      removeOnFail: { age: KEEP_FAILED_S },
    }),
    delay(made) {
      const step = Math.min(baseMs * 2 ** (made - 1), capMs);
      return Math.round(step * (1 + JITTER * (2 * random() - 1)));
    },
  };
}
