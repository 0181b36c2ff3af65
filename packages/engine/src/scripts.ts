/**
 * The one Lua loader of every package. A script is one file `<name>.lua` whose header comment
 * (`--[[ ... ]]`, first thing in the file) lists its keys as `KEYS[n]` and its arguments as
 * `ARGV[n]`: the number of keys it takes is read from there, never kept a second time (a script
 * whose header ends its keys with an open `KEYS[n ..]` takes a number that varies, which its
 * caller passes first, before the keys). Each is
 * registered as the command `tl_<name>`, so ioredis sends EVALSHA (EVAL after a Redis restart
 * emptied the script cache) and metrics name the script rather than `evalsha`.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';

export type ScriptReply = (string | number | null)[];
export type ScriptRunner<R = ScriptReply> = (...args: (string | number)[]) => Promise<R>;

export interface LuaScript {
  name: string;
  /** `tl_<name>`: the command it is defined as, and its label in metrics. */
  command: string;
  /** Null for a script whose caller passes the number first (`KEYS[n ..]` in its header). */
  numberOfKeys: number | null;
  /** What Redis runs: a line naming the script, the prelude if any, then the file. */
  source: string;
  sha: string;
}

export interface ScriptOptions {
  /** A file of shared helpers in the same folder (`_emit` for the engine's), put before each script. */
  prelude?: string;
}

const HEADER = /^--\[\[([\s\S]*?)\]\]/;

/** The number of keys a script takes: the highest `KEYS[n]` its header names; null for `KEYS[n ..]`. */
export function keyCount(name: string, text: string): number | null {
  const header = HEADER.exec(text);
  if (!header) throw new Error(`${name}.lua: no header comment (--[[ KEYS[n] ... ARGV[n] ... ]]) at its top`);
  if (/KEYS\[\d+ *\.\.\]/.test(header[1]!)) return null;
  let count = 0;
  for (const [, n] of header[1]!.matchAll(/KEYS\[(\d+)\]/g)) count = Math.max(count, Number(n));
  return count;
}

/** Every script read so far, by the SHA1 EVALSHA sends and by the source EVAL sends. */
const bySha = new Map<string, string>();
const bySource = new Map<string, string>();

const read = new Map<string, LuaScript>();

/** Reads `<dir>/<name>.lua` as Redis will run it (once per process). */
export function readScript(dir: URL, name: string, options: ScriptOptions = {}): LuaScript {
  const id = `${dir.href}${name}|${options.prelude ?? ''}`;
  const known = read.get(id);
  if (known) return known;
  const text = readFileSync(new URL(`${name}.lua`, dir), 'utf8');
  const prelude = options.prelude ? `${readFileSync(new URL(`${options.prelude}.lua`, dir), 'utf8')}\n` : '';
  const command = `tl_${name}`;
  const source = `-- ${command}\n${prelude}${text}`;
  const sha = createHash('sha1').update(source).digest('hex');
  bySha.set(sha, command);
  bySource.set(source, command);
  const script = { name, command, numberOfKeys: keyCount(name, text), source, sha };
  read.set(id, script);
  return script;
}

/**
 * `tl_<name>` of a script loaded in this process, from what EVALSHA (its SHA1) or EVAL (its
 * source: the first run on a connection, or after Redis lost its script cache) sends; undefined
 * for any other.
 */
export function scriptLabel(command: 'evalsha' | 'eval', first: string): string | undefined {
  return (command === 'evalsha' ? bySha : bySource).get(first);
}

/**
 * Defines the scripts `names` of the folder `dir` on a connection (once per connection) and
 * returns a runner for each: KEYS first, as many as the header names, then ARGV. Call it before
 * the connection's first command: ioredis copies a connection's commands into each auto-pipeline
 * as it creates it, and a command defined later is missing from a pipeline already open, which
 * then breaks whole.
 */
export function defineScripts<N extends string, R = ScriptReply>(
  redis: Redis,
  dir: URL,
  names: readonly N[],
  options: ScriptOptions = {},
): Record<N, ScriptRunner<R>> {
  const out = {} as Record<N, ScriptRunner<R>>;
  for (const name of names) {
    const script = readScript(dir, name, options);
    if (!(script.command in redis))
      redis.defineCommand(script.command, {
        ...(script.numberOfKeys === null ? {} : { numberOfKeys: script.numberOfKeys }),
        lua: script.source,
      });
    out[name] = (redis as unknown as Record<string, ScriptRunner<R>>)[script.command]!.bind(redis);
  }
  return out;
}

const ENGINE_LUA = new URL('../lua/', import.meta.url);

/** The engine's task scripts; each gets the shared helpers of `_emit.lua`. */
const TASK_SCRIPTS = [
  'create',
  'enqueue',
  'transition',
  'cancel',
  'delete',
  'claim',
  'renew',
  'append',
  'checkpoint',
  'request_input',
  'provide_input',
  'input_timeout',
  'expect_callback',
  'idempotency_begin',
  'idempotency_finish',
  'lease_index',
  'tenant_index',
  'lease_unindex',
  'claim_unindex',
  'park_unindex',
  'place_unindex',
] as const;

export type ScriptName = (typeof TASK_SCRIPTS)[number];
export type Scripts = Record<ScriptName, ScriptRunner>;

/** Source of a task script as Redis runs it (tests run it through plain EVAL). */
export function scriptSource(name: ScriptName): string {
  return readScript(ENGINE_LUA, name, { prelude: '_emit' }).source;
}

/** Defines every task script on a connection (see defineScripts). */
export function loadScripts(redis: Redis): Scripts {
  return defineScripts(redis, ENGINE_LUA, TASK_SCRIPTS, { prelude: '_emit' });
}

/** The scheduler's scripts over its index (sched/keys.ts; no prelude: they write no task events). */
export function loadSchedulerScripts(redis: Redis) {
  return {
    ...defineScripts<'dispatch' | 'lend', string[]>(redis, ENGINE_LUA, ['dispatch', 'lend']),
    ...defineScripts<'leader_renew' | 'leader_release', number>(redis, ENGINE_LUA, [
      'leader_renew',
      'leader_release',
    ]),
  };
}

// Read now, so that metrics name them from the first command on, whichever connection runs them.
for (const name of TASK_SCRIPTS) scriptSource(name);
for (const name of ['dispatch', 'lend', 'leader_renew', 'leader_release']) readScript(ENGINE_LUA, name);
