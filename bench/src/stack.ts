import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  freePort,
  ROOT,
  startRedis,
  startServices,
  type RedisServer,
  type RedisSource,
  type Service,
  type StackRedis,
} from '@taskline/testing';

export { ROOT };

/** The tenant and key every benchmark client uses. */
export const TENANT = 'bench';
export const API_KEY = 'bench-key-0001';

/**
 * Settings the benchmark stack runs with, on top of the defaults in packages/config. Documented in
 * bench/README.md: per-tenant request limits are raised so the load itself is measured.
 */
export const BENCH_ENV: Record<string, string> = {
  TASKLINE_API_KEYS: `${TENANT}:${API_KEY}`,
  TASKLINE_MODELS: 'tiny-chat,instant',
  TASKLINE_SNAPSHOT_MODELS: 'tiny-chat,instant',
  TASKLINE_WORKER_MODELS: 'instant,tiny-chat',
  TASKLINE_WORKER_SLOTS: '64',
  TASKLINE_RATE_LIMIT_PER_S: '1000000',
  TASKLINE_RATE_LIMIT_BURST: '1000000',
  TASKLINE_MAX_UNFINISHED_TASKS: '1000000',
  TASKLINE_MAX_STREAMS: '100000',
  TASKLINE_METRICS_PORT: '0',
  /**
   * One onnxruntime thread for the worker and for the bare model alike: on two cores a second
   * thread only fights Redis, the api and the SSE client for the core they need.
   */
  TASKLINE_INTRA_OP_THREADS: '1',
};

/** BENCH_CPU_PROFILE_DIR: every service writes a V8 CPU profile there (`--cpu-prof`) when it stops. */
const PROFILE_DIR = process.env.BENCH_CPU_PROFILE_DIR;

/** Memory of a live process from /proc: resident now and the high-water mark, in MiB. */
export function memoryOf(pid: number): { rssMb: number; peakRssMb: number } {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? NaN);
    return { rssMb: Math.round(kb('VmRSS') / 102.4) / 10, peakRssMb: Math.round(kb('VmHWM') / 102.4) / 10 };
  } catch {
    return { rssMb: NaN, peakRssMb: NaN };
  }
}

/**
 * CPU time (user + system, every thread) a process has used so far, in ms: /proc counts in USER_HZ
 * ticks, 100 a second on Linux. `'self'` is this benchmark process.
 */
export function cpuMsOf(pid: number | 'self'): number {
  if (pid === 'self') {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1000;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which sits in parentheses and may hold spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return NaN;
  }
}

/** Starts watching the whole host's CPU (/proc/stat); `percent()` is the share left idle since. */
export function hostIdle(): { percent(): number } {
  const read = () => {
    const fields = readFileSync('/proc/stat', 'utf8')
      .split('\n')[0]!
      .trim()
      .split(/\s+/)
      .slice(1)
      .map(Number);
    // user nice system idle iowait irq softirq steal: idle and iowait are time nobody ran.
    return { idle: fields[3]! + (fields[4] ?? 0), total: fields.slice(0, 8).reduce((a, b) => a + b, 0) };
  };
  const before = read();
  return {
    percent() {
      const now = read();
      return Math.round(((now.idle - before.idle) / Math.max(1, now.total - before.total)) * 100);
    },
  };
}

/** Processes to meter by name: a pid, or this benchmark process. */
export type Procs = Record<string, number | 'self'>;

/** CPU ms per task of each metered process, and how busy they kept the machine together (%). */
export interface CpuCost {
  msPerTask: Record<string, number>;
  busyPercent: number;
}

/**
 * Starts counting the CPU time of named processes; `perTask(n)` gives each one's ms per task since
 * the start, and `busyPercent` the share of the machine (all cores) they used together.
 */
export function cpuMeter(pids: Procs) {
  const t0 = performance.now();
  const before = Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, cpuMsOf(pid)]));
  return {
    perTask(n: number): CpuCost {
      const wall = performance.now() - t0;
      let used = 0;
      const msPerTask: Record<string, number> = {};
      for (const [name, pid] of Object.entries(pids)) {
        const ms = cpuMsOf(pid) - before[name]!;
        used += ms;
        msPerTask[name] = Math.round((ms / n) * 1000) / 1000;
      }
      return { msPerTask, busyPercent: Math.round((used / (wall * cpus().length)) * 100) };
    },
  };
}

/** CPU ms per task of all the metered processes together. */
export function totalMs(cost: CpuCost): number {
  return Math.round(Object.values(cost.msPerTask).reduce((a, b) => a + b, 0) * 100) / 100;
}

/** A stack process the benchmark meters by name (`scheduler`, `gpu-worker`, `api`). */
export interface BenchService {
  name: string;
  child: ChildProcess;
  memory(): { rssMb: number; peakRssMb: number };
}

/** Redis, scheduler, gpu-worker and api as separate processes, the way production runs them. */
export interface Stack<R extends StackRedis = RedisServer> {
  redis: R;
  apiUrl: string;
  services: BenchService[];
  /**
   * Starts a tool worker serving `module` (item 10), metered as `tool-worker` from then on. It
   * runs the sources through tsx: the module is TypeScript, and a built worker imports no `.ts`.
   */
  addToolWorker(module: string): Promise<void>;
  stop(): Promise<void>;
}

export interface StackOptions<R extends StackRedis = RedisServer> {
  /** By default a Redis of the stack's own with `appendfsync always`; a cluster for the cluster item. */
  redis?: RedisSource<R>;
  /** Leave out the scheduler and worker (the fan-out benchmark writes events itself). */
  apiOnly?: boolean;
  env?: Record<string, string>;
}

/** `@taskline/testing`'s stack of built services (as deployed), with the benchmark's settings. */
export async function startBenchStack<R extends StackRedis = RedisServer>(
  options: StackOptions<R> = {},
): Promise<Stack<R>> {
  const own = () => startRedis({ appendfsync: 'always' }) as unknown as Promise<R>;
  const stack = await startServices<R>({
    redis: options.redis ?? own,
    env: { ...BENCH_ENV, ...options.env },
    schedulers: 0,
    drainWhenUp: true,
    nodeArgs: PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`] : [],
  });
  const started: Service[] = [];
  try {
    if (!options.apiOnly) {
      started.push(stack.scheduler(await freePort(), {}, { name: 'scheduler' }));
      await started[0]!.up;
      started.push(stack.worker({}, { name: 'gpu-worker' }));
      await started[1]!.up;
    }
    const api = stack.api(await freePort(), {}, { name: 'api' });
    started.push(api);
    await api.up;
    const metered = (s: Service): BenchService => ({
      name: s.name,
      child: s.child!,
      memory: () => memoryOf(s.child!.pid!),
    });
    const services = started.map(metered);
    return {
      redis: stack.redis,
      apiUrl: api.base,
      services,
      async addToolWorker(module) {
        const worker = stack.toolWorker(module, {}, { name: 'tool-worker' });
        started.push(worker);
        await worker.up;
        services.push(metered(worker));
      },
      async stop() {
        await Promise.all(started.map(profiledStop));
        await stack.stop();
      },
    };
  } catch (err) {
    await stack.stop();
    throw err;
  }
}

/** A profile is written on a clean exit only: with BENCH_CPU_PROFILE_DIR, drain first and kill after a grace period. */
async function profiledStop(s: Service): Promise<void> {
  if (!PROFILE_DIR || !s.running) return;
  s.child!.kill('SIGTERM');
  await Promise.race([s.exited, sleep(5000)]);
}
