// Loads the limit scripts (`lua/`) through the engine's one loader.
import { defineScripts } from '@taskline/engine';
import type { Redis } from 'ioredis';

type Runner<R> = (...args: (string | number)[]) => Promise<R>;
export interface LimitScripts {
  token_bucket: Runner<[number, number]>;
  stream_slot: Runner<number>;
  stream_renew: Runner<number>;
  stream_release: Runner<number>;
  reservation_commit: Runner<number>;
  auth_failures: Runner<[number, number]>;
}

/**
 * The limit scripts (`lua/`, keys and arguments in each header), through the engine's one loader:
 * each is `tl_<name>` on the connection and in metrics, its number of keys read from its header.
 */
export function loadLimitScripts(redis: Redis): LimitScripts {
  const dir = new URL('../lua/', import.meta.url);
  return defineScripts(redis, dir, [
    'token_bucket',
    'stream_slot',
    'stream_renew',
    'stream_release',
    'reservation_commit',
    'auth_failures',
  ]) as unknown as LimitScripts;
}
