/**
 * Item 8: the lifecycle of item 1 (instant tasks created over HTTP until every one ended) on a
 * Redis Cluster of 3 primaries and 3 replicas with AOF, in the same run as the single Redis. Redis
 * commands per task are the sum of `INFO commandstats` deltas over the primaries (a replica's
 * counts repeat its primary's), less the idle stack's own commands and the benchmark's polls.
 * Every node is a process on the same host: on two cores this shows what a cluster costs a task
 * (more round trips, a `WAIT` per written node), not how it scales.
 */
import type { Redis } from 'ioredis';
import { connectRedis } from '@taskline/engine';
import { startRedisCluster, type RedisCluster } from '@taskline/testing';
import { INSTANT } from './queue.js';
import { commandCalls, diffCalls } from './redis-cost.js';
import { startBenchStack } from './stack.js';
import { nowMs, round, sleep } from './stats.js';
import { createMany, waitEnded } from './taskline.js';

export interface ClusterLifecycleResult {
  tasks: number;
  concurrency: number;
  nodes: { primaries: number; replicas: number };
  seconds: number;
  tasksPerS: number;
  statuses: Record<string, number>;
  /** Commands per task summed over the primaries. */
  commandsPerTask: number;
  top: { command: string; perTask: number }[];
}

/** `INFO commandstats` summed over connections to every primary. */
async function clusterCalls(primaries: Redis[]): Promise<Map<string, number>> {
  const sum = new Map<string, number>();
  for (const p of primaries)
    for (const [cmd, n] of await commandCalls(p)) sum.set(cmd, (sum.get(cmd) ?? 0) + n);
  return sum;
}

export async function clusterLifecycle(n: number, concurrency: number, idleMs: number) {
  const stack = await startBenchStack<RedisCluster>({
    redis: () => startRedisCluster({ appendfsync: 'always' }),
  });
  const redis = connectRedis(stack.redis.url, 'bench-cluster');
  // Plain connections to each primary: INFO on a cluster client reaches one node only.
  const primaries = (await stack.redis.primaries()).map((p) => connectRedis(p.url, 'bench-count'));
  try {
    // The same warm-up as the single Redis's: the first tasks pay for connections and scripts.
    await waitEnded(redis, await createMany(stack.apiUrl, 20, 8, INSTANT));
    const idle0 = await clusterCalls(primaries);
    await sleep(idleMs);
    const idle = diffCalls(await clusterCalls(primaries), idle0);
    const c0 = await clusterCalls(primaries);
    const t0 = nowMs();
    const ids = await createMany(stack.apiUrl, n, concurrency, INSTANT);
    const ended = await waitEnded(redis, ids);
    const ms = ended.lastEndAt - t0;
    const delta = diffCalls(await clusterCalls(primaries), c0);
    delta.set('hmget', (delta.get('hmget') ?? 0) - ended.pollCommands);
    const net: [string, number][] = [];
    for (const [cmd, calls] of delta) {
      if (cmd === 'info') continue;
      const v = calls - ((idle.get(cmd) ?? 0) * ms) / idleMs;
      if (v > 0) net.push([cmd, v / n]);
    }
    net.sort((a, b) => b[1] - a[1]);
    const result: ClusterLifecycleResult = {
      tasks: n,
      concurrency,
      nodes: { primaries: primaries.length, replicas: stack.redis.nodes.length - primaries.length },
      seconds: round(ms / 1000),
      tasksPerS: round((n * 1000) / ms, 1),
      statuses: ended.statuses,
      commandsPerTask: round(
        net.reduce((s, [, v]) => s + v, 0),
        2,
      ),
      top: net.slice(0, 8).map(([command, perTask]) => ({ command, perTask: round(perTask, 2) })),
    };
    return result;
  } finally {
    for (const p of primaries) p.disconnect();
    redis.disconnect();
    await stack.stop();
  }
}

/** Item 8's table: the cluster beside the single Redis of item 1, with what two cores can show. */
export function clusterTable(
  single: { tasksPerS: number; seconds: number; commandsPerTask: number } | undefined,
  c: ClusterLifecycleResult,
): string[] {
  return [
    '## 8. Lifecycle on a Redis Cluster',
    '',
    `${c.tasks} instant tasks, ${c.concurrency} creates in flight, the same stack and settings as item 1 on a Redis Cluster of ${c.nodes.primaries} primaries and ${c.nodes.replicas} replicas (AOF, \`appendfsync always\`), in the same run. Commands per task: \`INFO commandstats\` deltas summed over the primaries, net of the idle background and the benchmark's reads. Every node runs on this host's cores: this shows what a cluster costs a task, not how it scales (a cluster scales by nodes on machines of their own).`,
    '',
    '| Redis | tasks per s | seconds | commands per task |',
    '| --- | --- | --- | --- |',
    ...(single
      ? [`| one Redis (item 1) | ${single.tasksPerS} | ${single.seconds} | ${single.commandsPerTask} |`]
      : []),
    `| Redis Cluster | ${c.tasksPerS} | ${c.seconds} | ${c.commandsPerTask} |`,
    '',
    `Most frequent commands per task on the cluster: ${c.top.map((t) => `${t.command} ${t.perTask}`).join(', ')}.`,
    '',
  ];
}
