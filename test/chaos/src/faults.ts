/**
 * The chaos run's faults: every 0.6-1.6 s one of an api, a scheduler or a worker is SIGKILLed
 * (and restarted), drained past its deadline or paused past its lease, the kind injected least so
 * far first; Redis is SIGKILLed once and restarted from its AOF, or on a Redis Cluster a primary is
 * SIGKILLed twice (its replica promoted) and one `CLUSTER FAILOVER` switches another. On one Redis,
 * every 2-4 s the proxy in front of it resets every connection and refuses new ones for 50-300 ms.
 * Every step is bounded: one that does not end fails the run with its name instead of hanging it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { bounded, type RedisCluster, type RedisServer, type Service } from '@taskline/testing';
import type { ChaosStack } from './chaos-stack.js';
import { apiDown, elapsed, faults, ON_CLUSTER, rand, redisDown, SECONDS } from './observed.js';
import * as tools from './tools.js';
import { stopForFault } from './visible.js';

/** A fault's own step (a kill, a drain, Redis's restart): past it, the run stops and says which. */
export const FAULT_BOUND_MS = 30_000;
/** deploy/haproxy/haproxy.cfg's `rise 2` at `inter 1s`, and a check's own time. */
const LB_REJOIN_MS = 3000;

interface RedisStep {
  /** When, as a share of the run's seconds. */
  share: number;
  run(c: ChaosStack): Promise<void>;
}

/** One Redis: SIGKILLed once, restarted from its AOF. */
const SINGLE_STEPS: RedisStep[] = [
  {
    share: 0.4,
    async run(c) {
      const redis = c.redis as RedisServer;
      faults.push({ at_ms: elapsed(), target: 'redis', action: 'SIGKILL' });
      await bounded('the Redis kill', FAULT_BOUND_MS, redis.kill());
      await sleep(2000);
      await bounded('the Redis restart from its AOF', FAULT_BOUND_MS, redis.restart());
      faults.push({ at_ms: elapsed(), target: 'redis', action: 'restart from AOF' });
    },
  },
];

/** A random primary of the cluster now (roles move with every failover). */
async function somePrimary(cluster: RedisCluster): Promise<RedisServer> {
  const primaries = await cluster.primaries();
  return primaries[rand(primaries.length)]!;
}

/**
 * A Redis Cluster: a primary SIGKILLed twice (its replica promoted, the killed node back from its
 * AOF as a replica) and one planned `CLUSTER FAILOVER`. A promotion waits for the node timeout and
 * an election, so its step's bound is the fault bound twice.
 */
const killPrimary: RedisStep['run'] = async (c) => {
  const cluster = c.redis as RedisCluster;
  const primary = await somePrimary(cluster);
  faults.push({ at_ms: elapsed(), target: 'redis', action: `SIGKILL a primary (${primary.port})` });
  const promoted = await bounded(
    'the promotion of a replica',
    2 * FAULT_BOUND_MS,
    cluster.killPrimary(primary),
  );
  faults.push({ at_ms: elapsed(), target: 'redis', action: `replica promoted (${promoted.port})` });
};
const CLUSTER_STEPS: RedisStep[] = [
  { share: 0.1, run: killPrimary },
  { share: 0.4, run: killPrimary },
  {
    share: 0.7,
    async run(c) {
      const cluster = c.redis as RedisCluster;
      const primary = await somePrimary(cluster);
      const next = await bounded('CLUSTER FAILOVER', 2 * FAULT_BOUND_MS, cluster.failover(primary));
      faults.push({
        at_ms: elapsed(),
        target: 'redis',
        action: `CLUSTER FAILOVER (${primary.port} to ${next.port})`,
      });
    },
  },
];

/** The Redis fault kinds every run must have injected (minimums.ts). */
export const REDIS_FAULTS = ON_CLUSTER
  ? ['redis SIGKILL a primary', 'redis replica promoted', 'redis CLUSTER FAILOVER']
  : ['redis SIGKILL', 'redis restart from AOF', 'redis connection drop'];

export async function faultLoop(c: ChaosStack, until: number): Promise<void> {
  await Promise.all([processFaults(c, until), connectionDrops(c, until)]);
}

/**
 * Short Redis connection drops beside the other faults, as a load balancer, a NAT timeout or a
 * network blip gives them: every connection through the proxy reset at once, new ones refused for
 * 50-300 ms (each a window in which a 503 + Retry-After is allowed). Nothing on a Redis Cluster
 * (no proxy: see ChaosStack.proxy).
 */
async function connectionDrops(c: ChaosStack, until: number): Promise<void> {
  const proxy = c.proxy;
  if (!proxy) return;
  for (;;) {
    await sleep(2000 + rand(2000));
    if (Date.now() >= until) return;
    const w = { from: Date.now(), to: Infinity };
    redisDown.push(w);
    faults.push({ at_ms: elapsed(), target: 'redis', action: 'connection drop' });
    await proxy.outage(50 + rand(251));
    w.to = Date.now();
  }
}

async function processFaults(c: ChaosStack, until: number): Promise<void> {
  // From the start of the load, not of the process: a slow cluster start must not move it first.
  const start = Date.now();
  const redisSteps = (ON_CLUSTER ? CLUSTER_STEPS : SINGLE_STEPS).map((s) => ({
    ...s,
    at: start + Math.floor(SECONDS * 1000 * s.share),
  }));
  let redisBusy = false;
  const restarting = new Set<Service>();
  const pending: Promise<void>[] = [];
  // A slow host's load can end before every process fault kind had its turn (minimums.ts): those
  // are still injected after it, as the Redis steps are, the kind least injected going first.
  const going = () =>
    Date.now() < until || (tools.uninjected().length > 0 && Date.now() < until + FAULT_BOUND_MS);
  while (going()) {
    // Often enough that a 20 s run injects every fault kind (see minimums.ts).
    await sleep(600 + rand(1000));
    if (!going()) break;
    // Once due, whatever restarts are in progress: they reconnect like every other client.
    // One Redis fault at a time. On one Redis the loop waits for it (seconds); a cluster's
    // promotion takes the node timeout, an election and the old node's resync, so the process
    // faults go on beside it.
    const due = redisSteps[0];
    if (due && !redisBusy && Date.now() >= due.at) {
      redisSteps.shift();
      const step = redisStep(c, due);
      if (!ON_CLUSTER) {
        await step;
        continue;
      }
      redisBusy = true;
      pending.push(step.finally(() => (redisBusy = false)));
    }
    // Only a process that is up; its restart runs alongside, so faults keep coming every few seconds.
    // One whose restart failed is not up either: a drain of it would wait for an exit long past.
    // One api replica always stays: both down is an outage HAProxy rightly answers 503, not a fault to survive.
    const apiRestarting = c.apis.some((a) => restarting.has(a) || !a.running);
    const up = [...c.apis, ...c.schedulers, ...c.workers, ...c.toolWorkers].filter(
      (s) => s.running && !restarting.has(s) && !(apiRestarting && c.apis.includes(s as never)),
    );
    const chosen = tools.chooseFault(up, c);
    if (!chosen) continue;
    const { target, kind } = chosen;
    const isApi = c.apis.includes(target as never);
    const w = { from: Date.now(), to: Infinity };
    if (isApi) apiDown.push(w);
    // A (tool) worker drain and a worker pause are tool-chaos kinds of their own (tools.ts); every
    // other kind is a SIGKILL.
    const other =
      kind.endsWith('drain') || kind.endsWith('pause')
        ? tools.workerFault(target, kind as tools.WorkerFaultKind)
        : null;
    const action =
      other?.action ??
      (await bounded(`${kind} of ${target.name}`, FAULT_BOUND_MS, stopForFault(target, false)));
    faults.push({ at_ms: elapsed(), target: target.name, action });
    restarting.add(target);
    if (other && !other.restart) {
      pending.push(other.done.then(() => void restarting.delete(target)));
      continue;
    }
    if (other) await bounded(`${kind} of ${target.name}`, FAULT_BOUND_MS, other.done);
    pending.push(
      (async () => {
        await sleep(300 + rand(1200));
        await target
          .start()
          .catch((err: Error) =>
            faults.push({ at_ms: elapsed(), target: target.name, action: `restart failed: ${err.message}` }),
          );
        // A restarted api serves once HAProxy has seen two passing checks (`rise 2`, `inter 1s`):
        // killing the other one before would leave the balancer no replica at all.
        if (isApi) await sleep(LB_REJOIN_MS);
        restarting.delete(target);
        w.to = Date.now();
      })(),
    );
  }
  // Each restart gives up after 120 s (Service.start) and records the failure.
  await bounded('the restarts of killed processes', 150_000, Promise.all(pending));
  // Redis faults the load outlasted (a slow host's promotions): still injected, the report's times show when.
  for (const step of redisSteps) await redisStep(c, step);
}

/** A Redis fault with its window, in which 503 + Retry-After is allowed. */
async function redisStep(c: ChaosStack, step: RedisStep): Promise<void> {
  const w = { from: Date.now(), to: Infinity };
  redisDown.push(w);
  await step.run(c);
  w.to = Date.now();
}
