/**
 * The dispatch side of the scheduler's index (see ./keys.ts): the scheduler decides when to run a
 * round and where its picks go (BullMQ); what it reads and writes here goes through these operations.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { childrenQueue } from '../keys.js';
import { isRedisUnavailable } from '../redis.js';
import { loadSchedulerScripts } from '../scripts.js';
import { parseOfferedState, schedulerKeys, type QueuedState } from './keys.js';

/** One task a dispatch round took. */
export interface Pick {
  tenant: string;
  id: string;
  /** The queued state the task was offered in; null for an entry without one (see `pickFair`). */
  state: QueuedState | null;
}

export interface FairShareOptions {
  quantum: number;
  maxRunning: number;
  weights: Map<string, number>;
}

/**
 * Defines the dispatch and leadership scripts on a connection; call it once, before the
 * connection's first rounds (see defineScripts: a command defined lazily breaks the auto-pipeline
 * other traffic of the same tick had already opened, and the process with it).
 */
export function defineDispatch(redis: Redis): void {
  loadSchedulerScripts(redis);
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
 * (dispatch.lua), or null when `token` no longer holds leadership. Each pick stays in `inflight`
 * until `handedOver`; one without a state (enqueue.lua always writes one) is left there for the
 * reconciler, which offers its task again with it.
 */
export async function pickFair(
  redis: Redis,
  token: string,
  model: string,
  budget: number,
  options: FairShareOptions,
): Promise<Pick[] | null> {
  // One round trip: the script reads the model's tenants and builds their keys from these
  // prefixes (one slot). A tenant's child generations (see queueTenant) have its weight.
  const reply = await loadSchedulerScripts(redis).dispatch(
    schedulerKeys.leader,
    schedulerKeys.tenants(model),
    schedulerKeys.rr(model),
    schedulerKeys.inflight,
    schedulerKeys.models,
    schedulerKeys.offered,
    token,
    Date.now(),
    budget,
    options.quantum,
    options.maxRunning,
    model,
    schedulerKeys.ready('', model),
    schedulerKeys.active(''),
    childrenQueue(''),
    ...[...options.weights].flat(),
  );
  if (reply[0] === 'corrupt') throw new Error(`dispatch refused: ${reply[1]} has the wrong type`);
  if (reply[0] !== 'ok') return null;
  const picks: Pick[] = [];
  for (let i = 1; i < reply.length; i += 3)
    picks.push({ tenant: reply[i]!, id: reply[i + 1]!, state: parseOfferedState(reply[i + 2]!) });
  return picks;
}

/**
 * Lends `slots` of each model to the creates (lend.lua), replacing the last loan, under `token`
 * and its cap on a tenant's running tasks; answers, per model in order, how many slots were taken
 * from the last loan (each a job queued since), or null when `token` no longer holds leadership.
 */
export async function lend(
  redis: Redis,
  token: string,
  maxRunning: number,
  slots: [model: string, slots: number][],
): Promise<number[] | null> {
  const reply = await loadSchedulerScripts(redis).lend(
    schedulerKeys.leader,
    schedulerKeys.loans,
    token,
    maxRunning,
    ...slots.flat(),
  );
  return reply[0] === 'ok' ? reply.slice(1).map(Number) : null;
}

/** These picks' jobs are queued: they leave `inflight` together (each task stays in its tenant's running set). */
export async function handedOver(redis: Redis, ids: string[]): Promise<void> {
  if (ids.length > 0) await redis.zrem(schedulerKeys.inflight, ...ids);
}

/** Models with ready tasks: all that a dispatch round needs to visit. */
export function readyModels(redis: Redis): Promise<string[]> {
  return redis.smembers(schedulerKeys.models);
}

/** How many models have ready tasks (none: the ready index is empty). */
export function readyModelCount(redis: Redis): Promise<number> {
  return redis.scard(schedulerKeys.models);
}

/**
 * Calls `onOffer` with the model of every task offered from now on (enqueue.lua publishes it), on
 * a connection of its own; returns that connection, for the caller to close.
 */
export async function listenForOffers(redis: Redis, onOffer: (model: string) => void): Promise<Redis> {
  // No retry limit: after a reconnect ioredis re-subscribes on its own, with no caller to catch a
  // MaxRetriesPerRequestError should Redis drop again first; that rejection would end the process.
  const sub = redis.duplicate({ enableAutoPipelining: false, maxRetriesPerRequest: null });
  sub.on('error', () => undefined); // reconnects on its own; the main connection logs the outage
  sub.on('message', (_channel: string, model: string) => onOffer(model));
  // A start during an outage (a cluster failing over gives up on a command after its redirections)
  // waits for Redis, as the start-up durability check does, instead of ending the process.
  for (;;) {
    try {
      await sub.subscribe(schedulerKeys.wake);
      return sub;
    } catch (err) {
      if (!isRedisUnavailable(err)) {
        sub.disconnect();
        throw err;
      }
      await sleep(SUBSCRIBE_RETRY_MS);
    }
  }
}

const SUBSCRIBE_RETRY_MS = 250;
