// The client's clock, injected so tests can record its waits instead of sleeping.
import { abortError } from './errors.js';

/**
 * Time as the SDK sees it. Injected so tests can record every wait the client asks for instead of
 * timing it, and so no poll interval depends on a real clock in a test.
 */
export interface Clock {
  now(): number;
  /** Resolves after `ms`; rejects with `aborted` when `signal` fires first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(abortError());
      const onAbort = () => {
        clearTimeout(timer);
        reject(abortError());
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      signal?.addEventListener('abort', onAbort, { once: true });
    }),
};
