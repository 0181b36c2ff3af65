import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { taskKeys } from '@taskline/engine/keys';
import { createMany, waitEnded } from './taskline.js';
import { commandCalls, diffCalls, keyBytes, usedMemory } from './redis-cost.js';
import { createTask } from './http.js';
import { forkChild, type Child } from './children.js';
import { cpuMeter, type CpuCost, type Procs } from './stack.js';
import { nowMs, openLoop, round, sleep, summarize, type Summary } from './stats.js';

export const RAW_QUEUE = 'bench-raw';
export const INSTANT = (i: number) => ({ model: 'instant', input: `task ${i}` });

/** The raw BullMQ pair: a Queue here and a no-op Worker in its own process, on the same Redis. */
export interface RawBullmq {
  queue: Queue;
  worker: Child;
  /** Jobs completed so far, counting every phase. */
  added: number;
  addAll(n: number, concurrency: number): Promise<void>;
  /** Resolves when the worker has completed `added` jobs, with the time of the last one. */
  drained(): Promise<number>;
  close(): Promise<void>;
}

export async function startRawBullmq(url: string, concurrency: number): Promise<RawBullmq> {
  const queue = new Queue(RAW_QUEUE, { connection: { url, maxRetriesPerRequest: null } as never });
  await queue.waitUntilReady();
  const worker = await forkChild('./bullmq-worker.ts', {
    BENCH_REDIS_URL: url,
    BENCH_QUEUE: RAW_QUEUE,
    BENCH_CONCURRENCY: String(concurrency),
  });
  const raw: RawBullmq = {
    queue,
    worker,
    added: 0,
    async addAll(n, inflight) {
      let next = 0;
      await Promise.all(
        Array.from({ length: Math.min(inflight, n) }, async () => {
          while (next < n) {
            const i = next++;
            await queue.add('run', { i }, { removeOnComplete: true, removeOnFail: true });
          }
        }),
      );
      raw.added += n;
    },
    async drained() {
      worker.send({ waitFor: raw.added });
      return (await worker.next<{ lastAt: number }>()).lastAt;
    },
    async close() {
      await worker.stop();
      await queue.close();
    },
  };
  return raw;
}

export interface CommandCost {
  /** Commands per finished task, net of the idle background and the benchmark's own reads. */
  perTask: number;
  top: { command: string; perTask: number }[];
}

/** Commands per task from an `INFO commandstats` delta over `n` tasks and `ms`, net of the idle rate. */
export function costOf(
  delta: Map<string, number>,
  n: number,
  background: Map<string, number>,
  ms: number,
): CommandCost {
  const net: [string, number][] = [];
  for (const [cmd, calls] of delta) {
    if (cmd === 'info' || cmd === 'memory' || cmd === 'scan') continue;
    const v = calls - (background.get(cmd) ?? 0) * ms;
    if (v > 0) net.push([cmd, v / n]);
  }
  net.sort((a, b) => b[1] - a[1]);
  return {
    perTask: round(
      net.reduce((s, [, v]) => s + v, 0),
      2,
    ),
    top: net.slice(0, 8).map(([command, perTask]) => ({ command, perTask: round(perTask, 2) })),
  };
}

/** Commands per ms of each kind while everything sits idle: heartbeats, leadership, dispatch polls. */
export async function idleRate(redis: Redis, ms: number): Promise<Map<string, number>> {
  const before = await commandCalls(redis);
  await sleep(ms);
  const d = diffCalls(await commandCalls(redis), before);
  return new Map([...d].map(([k, v]) => [k, v / ms]));
}

export interface LifecycleResult {
  tasks: number;
  concurrency: number;
  taskline: { seconds: number; tasksPerS: number; statuses: Record<string, number> };
  bullmq: { seconds: number; jobsPerS: number };
  ratio: number;
  cost: {
    taskline: CommandCost;
    bullmq: CommandCost;
    bytesPerTask: number;
    bytesByKey: { pattern: string; bytesPerTask: number }[];
    /** CPU per finished task of each process on the task's way, while each side ran alone. */
    cpu: { taskline: CpuCost; bullmq: CpuCost };
  };
}

/** Issue item 1 (and the Redis side of item 7): create -> dispatch -> claim -> finish vs add -> process -> complete. */
export async function lifecycle(
  apiUrl: string,
  redis: Redis,
  raw: RawBullmq,
  procs: { taskline: Procs; bullmq: Procs },
  background: Map<string, number>,
  n: number,
  concurrency: number,
): Promise<LifecycleResult> {
  const mem0 = await usedMemory(redis);
  const c0 = await commandCalls(redis);
  const tasklineCpu = cpuMeter(procs.taskline);
  const t0 = nowMs();
  const ids = await createMany(apiUrl, n, concurrency, INSTANT);
  const ended = await waitEnded(redis, ids);
  const tasklineCpuCost = tasklineCpu.perTask(n);
  const c1 = await commandCalls(redis);
  const tasklineMs = ended.lastEndAt - t0;
  const delta = diffCalls(c1, c0);
  delta.set('hmget', (delta.get('hmget') ?? 0) - ended.pollCommands);
  const tasklineCost = costOf(delta, n, background, tasklineMs);
  // What stays in Redis per finished task during retention, by key pattern (a sample of tasks).
  const mem1 = await usedMemory(redis);
  const sample = ids.slice(0, Math.min(50, ids.length));
  const perKey = new Map<string, number>();
  for (const id of sample) {
    const k = taskKeys(id);
    const bytes = await keyBytes(redis, [k.task, k.events, k.tokens, k.inputs]);
    for (const [key, b] of Object.entries(bytes)) {
      const pattern = key.replace(id, '<id>');
      perKey.set(pattern, (perKey.get(pattern) ?? 0) + b / sample.length);
    }
  }

  const b0 = await commandCalls(redis);
  const rawCpu = cpuMeter(procs.bullmq);
  const r0 = nowMs();
  await raw.addAll(n, concurrency);
  const lastAt = await raw.drained();
  const rawCpuCost = rawCpu.perTask(n);
  const rawMs = lastAt - r0;
  const rawCost = costOf(diffCalls(await commandCalls(redis), b0), n, background, rawMs);

  const tasksPerS = (n * 1000) / tasklineMs;
  const jobsPerS = (n * 1000) / rawMs;
  return {
    tasks: n,
    concurrency,
    taskline: { seconds: round(tasklineMs / 1000), tasksPerS: round(tasksPerS, 1), statuses: ended.statuses },
    bullmq: { seconds: round(rawMs / 1000), jobsPerS: round(jobsPerS, 1) },
    ratio: round(tasksPerS / jobsPerS),
    cost: {
      taskline: tasklineCost,
      bullmq: rawCost,
      bytesPerTask: Math.round((mem1 - mem0) / n),
      bytesByKey: [...perKey]
        .map(([pattern, b]) => ({ pattern, bytesPerTask: Math.round(b) }))
        .sort((a, b) => b.bytesPerTask - a.bytesPerTask),
      cpu: { taskline: tasklineCpuCost, bullmq: rawCpuCost },
    },
  };
}

export interface AcceptanceResult {
  ratePerS: number;
  seconds: number;
  /** `sendLagP99`: how late the sends left against their schedule (ms), p99. */
  taskline: Summary & { errors: number; sendLagP99: number; cpu: CpuCost };
  bullmq: Summary & { errors: number; sendLagP99: number; cpu: CpuCost };
  p50Ratio: number;
  p99Ratio: number;
}

/** Issue item 2: open-loop creates at a fixed rate, latency from the send to the answer. */
export async function acceptance(
  apiUrl: string,
  redis: Redis,
  raw: RawBullmq,
  procs: { taskline: Procs; bullmq: Procs },
  ratePerS: number,
  seconds: number,
): Promise<AcceptanceResult> {
  // Each side first runs the same load for a second, unmeasured (JIT, connection pools).
  const warmupS = Math.min(1, seconds);
  const tl: number[] = [];
  const ids: string[] = [];
  let tlErrors = 0;
  const create = async (i: number, at: number, record: boolean) => {
    try {
      ids.push(await createTask(apiUrl, INSTANT(i)));
      if (record) tl.push(nowMs() - at);
    } catch {
      if (record) tlErrors++;
    }
  };
  await openLoop(ratePerS, warmupS, (i, at) => create(i, at, false));
  // What every process spends while the measured load runs: the rest of the stack works the
  // tasks meanwhile, as it does in production, and shares the cores with the api.
  const tlCpu = cpuMeter(procs.taskline);
  const tlLag = await openLoop(ratePerS, seconds, (i, at) => create(i, at, true));
  const tlCpuCost = tlCpu.perTask(ratePerS * seconds);
  // Let the worker finish the backlog so it does not load the BullMQ half.
  await waitEnded(redis, ids);

  const rq: number[] = [];
  let rqErrors = 0;
  let added = 0;
  const add = async (i: number, at: number, record: boolean) => {
    try {
      await raw.queue.add('run', { i }, { removeOnComplete: true, removeOnFail: true });
      added++;
      if (record) rq.push(nowMs() - at);
    } catch {
      if (record) rqErrors++;
    }
  };
  await openLoop(ratePerS, warmupS, (i, at) => add(i, at, false));
  const rqCpu = cpuMeter(procs.bullmq);
  const rqLag = await openLoop(ratePerS, seconds, (i, at) => add(i, at, true));
  const rqCpuCost = rqCpu.perTask(ratePerS * seconds);
  raw.added += added;
  await raw.drained();
  const a = summarize(tl);
  const b = summarize(rq);
  return {
    ratePerS,
    seconds,
    taskline: { ...a, errors: tlErrors, sendLagP99: tlLag.p99, cpu: tlCpuCost },
    bullmq: { ...b, errors: rqErrors, sendLagP99: rqLag.p99, cpu: rqCpuCost },
    p50Ratio: round(a.p50 / b.p50, 2),
    p99Ratio: round(a.p99 / b.p99, 2),
  };
}
