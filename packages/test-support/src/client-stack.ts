/**
 * The running stack the client and CLI tests talk to (`@taskline/testing`): a real Redis, a
 * scheduler, a gpu-worker and a real `api` process, plus a TaskStore on the same Redis to watch
 * attempts from the inside.
 */
import type { ChildProcess } from 'node:child_process';
import { connectRedis, TaskStore, visibleStepViolation } from '@taskline/engine';
import {
  ApiService,
  freePort,
  LOADED_MODULES_PRELOAD,
  LONG,
  startServices,
  until,
  type Service,
  type Stack as Services,
} from '@taskline/testing';
import { FIXTURE_ENTRIES } from './entries.js';

export const KEY_A = 'key-a-0123456789';
export { LOADED_MODULES_PRELOAD, until, visibleStepViolation };

/** A generation long enough to interrupt (see the gpu-worker fault tests). */
export const LONG_INPUT = LONG;

/** The api's settings: the tenants, the tiny model, an early SSE heartbeat. */
const API_ENV = {
  TASKLINE_API_KEYS: `tenant-a:${KEY_A}`,
  TASKLINE_MODELS: 'tiny-chat,plain-chat',
  TASKLINE_SNAPSHOT_MODELS: 'tiny-chat',
  TASKLINE_SSE_HEARTBEAT_MS: '200',
};

export interface Stack {
  cluster: Services;
  worker: ChildProcess;
  api: ApiService;
  port: number;
  base: string;
  /** A TaskStore on the stack's Redis: what the engine holds of a task (its request, say). */
  tasks: TaskStore;
  /** Kills the api process (SIGKILL) and starts a new one on the same port. */
  restartApi(): Promise<void>;
  /**
   * Interrupts the attempts of a running task `times` times, each after it streamed 20 tokens:
   * first the worker is drained past its short deadline (SIGTERM), then crashed (SIGKILL), a
   * fresh worker taking over each time (the last one becomes `worker`).
   */
  interrupt(id: string, times: number): Promise<void>;
  /** Drains the worker (it must be idle) and starts another with `env` on top, as `worker`. */
  replaceWorker(env: Record<string, string>): Promise<void>;
  stop(): Promise<void>;
}

/**
 * `env` goes to every process (api, scheduler, worker); with `fixtures` the api and worker run
 * the conformance entries, which add the conformance suite's fixture tools.
 */
export async function startClientStack(
  stepMs = '20',
  env: Record<string, string> = {},
  options: { fixtures?: boolean } = {},
): Promise<Stack> {
  const cluster = await startServices({
    ...(options.fixtures && { entries: FIXTURE_ENTRIES }),
    env: { TASKLINE_LEASE_MS: '1000', ...env },
    schedulerEnv: {
      TASKLINE_HEARTBEAT_MS: '100',
      TASKLINE_DISPATCH_INTERVAL_MS: '20',
      TASKLINE_LEADER_LEASE_MS: '1000',
      ...env,
    },
  });
  const store = new TaskStore(connectRedis(cluster.redis.url, 'test'), {
    taskRetentionMs: 3_600_000,
    eventRetentionMs: 3_600_000,
    idempotencyTtlS: 86_400,
    idempotencyPendingMs: 30_000,
  });
  // A short drain deadline: a SIGTERM (interrupt) cuts the running attempt almost at once.
  const startWorker = (extra: Record<string, string> = {}): Service =>
    cluster.worker({
      TASKLINE_WORKER_MODELS: 'tiny-chat',
      TASKLINE_WORKER_SLOTS: '2',
      TASKLINE_WORKER_MIN_STEP_MS: stepMs,
      TASKLINE_DRAIN_DEADLINE_MS: '100',
      ...env,
      ...extra,
    });
  let worker = startWorker();
  const port = await freePort();
  const api = cluster.api(port, { ...API_ENV, ...env }, { name: 'api' });
  await api.up;
  const replace = async (signal: NodeJS.Signals, extra?: Record<string, string>) => {
    await worker.kill(signal);
    worker = startWorker(extra);
    stack.worker = worker.child!;
  };
  const stack: Stack = {
    cluster,
    worker: worker.child!,
    api,
    port,
    base: api.base,
    tasks: store,
    async restartApi() {
      await api.kill();
      await api.start();
    },
    async interrupt(id, times) {
      for (let i = 0; i < times; i++) {
        const attempt = i + 1;
        await until(`attempt ${attempt} of ${id} to stream 20 tokens`, async () => {
          const task = await store.get(id);
          if (task?.attempt !== attempt || task.status !== 'running') return undefined;
          return (await store.snapshot(id)).length >= 20 ? true : undefined;
        });
        await replace(i % 2 === 0 ? 'SIGTERM' : 'SIGKILL');
      }
    },
    async replaceWorker(extra) {
      await replace('SIGTERM', extra);
    },
    async stop() {
      store.redis.disconnect();
      await cluster.stop();
    },
  };
  return stack;
}
