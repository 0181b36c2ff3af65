import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';

/** Each Lua script with the number of KEYS it takes (its header comment lists them). */
const SCRIPTS = {
  create: 5,
  enqueue: 6,
  transition: 5,
  cancel: 5,
  claim: 3,
  renew: 1,
  append: 4,
  request_input: 4,
  provide_input: 4,
  input_timeout: 5,
  idempotency_begin: 1,
  idempotency_finish: 1,
  lease_unindex: 1,
} as const;

export type ScriptName = keyof typeof SCRIPTS;
export type ScriptReply = (string | number | null)[];

const luaDir = new URL('../lua/', import.meta.url);
const prelude = readFileSync(new URL('_emit.lua', luaDir), 'utf8');

/** Source of a script as Redis runs it: the shared helpers, then the script itself. */
export function scriptSource(name: ScriptName): string {
  return `${prelude}\n${readFileSync(new URL(`${name}.lua`, luaDir), 'utf8')}`;
}

type Runner = (...args: (string | number)[]) => Promise<ScriptReply>;
export type Scripts = Record<ScriptName, Runner>;

/**
 * Registers every script on a connection once; ioredis then calls EVALSHA and falls back to
 * EVAL after a Redis restart flushed the script cache.
 */
export function loadScripts(redis: Redis): Scripts {
  const out = {} as Scripts;
  for (const [name, numberOfKeys] of Object.entries(SCRIPTS) as [ScriptName, number][]) {
    const command = `tl_${name}`;
    if (!(command in redis)) redis.defineCommand(command, { numberOfKeys, lua: scriptSource(name) });
    const fn = (redis as unknown as Record<string, Runner>)[command]!.bind(redis);
    out[name] = fn;
  }
  return out;
}

/** `tl_<name>` by the SHA1 EVALSHA sends, so that metrics can name a script instead of a hash. */
export const SCRIPT_BY_SHA: ReadonlyMap<string, string> = new Map(
  (Object.keys(SCRIPTS) as ScriptName[]).map((name) => [
    createHash('sha1').update(scriptSource(name)).digest('hex'),
    `tl_${name}`,
  ]),
);
