import type { Redis } from 'ioredis';
import { readFileSync } from 'node:fs';
import { schedulerKeys } from '@taskline/engine';
import { LEADER_KEY } from './leader.js';

/** The scheduler's own keys, next to the engine's index in the `{sched}` slot. */
export const SCHED_PREFIX = 'tl:{sched}:';
export const dispatchKeys = {
  state: `${SCHED_PREFIX}rr`,
  inflight: `${SCHED_PREFIX}inflight`,
  active: schedulerKeys.running,
} as const;

export interface Pick {
  tenant: string;
  id: string;
  /** The task's score in its tenant's ready set (its queue time), to put it back unchanged. */
  score: number;
  /** What was left of the tenant's turn before this pick, this pick included (see `rewindTurn`). */
  turn: number;
}

export interface FairShareOptions {
  quantum: number;
  maxRunning: number;
  weights: Map<string, number>;
}

const source = readFileSync(new URL('../lua/dispatch.lua', import.meta.url), 'utf8');

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
 * Takes up to `budget` ready tasks by weighted round robin across tenants (dispatch.lua), or
 * null when `token` no longer holds leadership.
 */
export async function pickFair(
  redis: Redis,
  token: string,
  budget: number,
  options: FairShareOptions,
): Promise<Pick[] | null> {
  if (!('tl_dispatch' in redis)) redis.defineCommand('tl_dispatch', { numberOfKeys: 4, lua: source });
  const weights = [...options.weights].flat();
  const reply = (await (
    redis as Redis & { tl_dispatch(...a: (string | number)[]): Promise<string[]> }
  ).tl_dispatch(
    LEADER_KEY,
    schedulerKeys.tenants,
    dispatchKeys.state,
    dispatchKeys.inflight,
    token,
    Date.now(),
    budget,
    options.quantum,
    options.maxRunning,
    SCHED_PREFIX,
    options.weights.size,
    ...weights,
  )) as string[];
  if (reply[0] !== 'ok') return null;
  const picks: Pick[] = [];
  for (let i = 1; i < reply.length; i += 4)
    picks.push({
      tenant: reply[i]!,
      id: reply[i + 1]!,
      score: Number(reply[i + 2]),
      turn: Number(reply[i + 3]),
    });
  return picks;
}

/**
 * Sets the round-robin state as if only the picks that were queued had been picked: after the
 * last of them, or, when none was, back to before the first pick. A pick put back (no free slot
 * for its model: the budget counts every model's slots) must not use up its tenant's turn, or
 * the tenants whose picks happen to come first in a round take every slot.
 */
export async function rewindTurn(redis: Redis, picks: Pick[], queued: boolean[]): Promise<void> {
  const last = queued.lastIndexOf(true);
  const state =
    last >= 0
      ? { last: picks[last]!.tenant, left: picks[last]!.turn - 1 }
      : { last: picks[0]!.tenant, left: picks[0]!.turn };
  await redis.hset(dispatchKeys.state, state);
}
