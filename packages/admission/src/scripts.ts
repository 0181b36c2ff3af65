import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';

/** Each limit script (`lua/`, keys and arguments in its header) with the number of KEYS it takes. */
const SCRIPTS = { token_bucket: 2, stream_slot: 1, reservation_commit: 1 } as const;

type Runner<R> = (...args: (string | number)[]) => Promise<R>;
export interface LimitScripts {
  token_bucket: Runner<[number, number]>;
  stream_slot: Runner<number>;
  reservation_commit: Runner<number>;
}

/**
 * The one place the limit scripts are loaded: each is registered on the connection as
 * `tl_<name>` (so metrics and script listings name it), once; ioredis then sends EVALSHA and
 * falls back to EVAL after a Redis restart emptied the script cache.
 */
export function loadLimitScripts(redis: Redis): LimitScripts {
  const out: Record<string, Runner<unknown>> = {};
  for (const [name, numberOfKeys] of Object.entries(SCRIPTS)) {
    const command = `tl_${name}`;
    if (!(command in redis)) {
      const lua = readFileSync(new URL(`../lua/${name}.lua`, import.meta.url), 'utf8');
      redis.defineCommand(command, { numberOfKeys, lua });
    }
    out[name] = (redis as unknown as Record<string, Runner<unknown>>)[command]!.bind(redis);
  }
  return out as unknown as LimitScripts;
}
