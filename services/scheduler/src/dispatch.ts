import type { Redis } from 'ioredis';
import { readFileSync } from 'node:fs';
import { indexTenant, parseOfferedState, schedulerKeys, type QueuedState } from '@taskline/engine';
import { LEADER_KEY } from './leader.js';

/** The scheduler's own keys, next to the engine's index in the `{sched}` slot. */
export const SCHED_PREFIX = 'tl:{sched}:';
export const dispatchKeys = {
  /** The round-robin cursor of one model's dispatch. */
  state: (model: string) => `${SCHED_PREFIX}rr:${model}`,
  inflight: `${SCHED_PREFIX}inflight`,
  active: schedulerKeys.running,
} as const;

export interface Pick {
  tenant: string;
  id: string;
  /** The queued state the task was offered in; null for an entry offered without one. */
  state: QueuedState | null;
}

export interface FairShareOptions {
  quantum: number;
  maxRunning: number;
  weights: Map<string, number>;
}

const source = readFileSync(new URL('../lua/dispatch.lua', import.meta.url), 'utf8');

/**
 * Defines `tl_dispatch` on a connection; call it once, before the connection's first rounds.
 * ioredis copies a connection's commands into each auto-pipeline as it creates it: defined lazily,
 * at the first round, the command was queued into a pipeline other traffic of the same tick had
 * already opened, which lacks it, and the whole pipeline broke (an uncaught TypeError, the process
 * down).
 */
export function defineDispatch(redis: Redis): void {
  // The number of keys varies with the model's tenants: each call passes it first.
  if (!('tl_dispatch' in redis)) redis.defineCommand('tl_dispatch', { lua: source });
}

/** Parses `tenant:weight,...`. */
export function parseWeights(spec: string): Map<string, number> {
  const weights = new Map<string, number>();
  for (const pair of spec.split(',').filter(Boolean)) {
    const at = pair.lastIndexOf(':');
    weights.set(pair.slice(0, at), Number(pair.slice(at + 1)));
  }
  return weights;
}

/**
 * Takes up to `budget` ready tasks of `model` by weighted round robin across tenants
 * (dispatch.lua), or null when `token` no longer holds leadership.
 */
export async function pickFair(
  redis: Redis,
  token: string,
  model: string,
  budget: number,
  options: FairShareOptions,
): Promise<Pick[] | null> {
  // Every key the script touches goes in KEYS: the model's tenants are read first, and each
  // one's ready index and running set are passed. A tenant's child generations (see queueTenant)
  // have its weight.
  const tenants = await redis.smembers(schedulerKeys.tenants(model));
  const reply = (await (
    redis as Redis & { tl_dispatch(...a: (string | number)[]): Promise<string[]> }
  ).tl_dispatch(
    6 + 2 * tenants.length,
    LEADER_KEY,
    schedulerKeys.tenants(model),
    dispatchKeys.state(model),
    dispatchKeys.inflight,
    schedulerKeys.models,
    schedulerKeys.offered,
    ...tenants.flatMap((tenant) => [schedulerKeys.ready(tenant, model), dispatchKeys.active(tenant)]),
    token,
    Date.now(),
    budget,
    options.quantum,
    options.maxRunning,
    model,
    ...tenants.flatMap((tenant) => [tenant, options.weights.get(indexTenant(tenant)) ?? 1]),
  )) as string[];
  if (reply[0] === 'corrupt') throw new Error(`dispatch refused: ${reply[1]} has the wrong type`);
  if (reply[0] !== 'ok') return null;
  const picks: Pick[] = [];
  for (let i = 1; i < reply.length; i += 3)
    picks.push({ tenant: reply[i]!, id: reply[i + 1]!, state: parseOfferedState(reply[i + 2]!) });
  return picks;
}
