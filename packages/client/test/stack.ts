/**
 * The running stack the client and CLI tests talk to, from the colleagues' own helpers: a real
 * Redis, scheduler and gpu-worker (`services/gpu-worker/test/helpers.ts`) and real `api`
 * processes (`services/api/test/helpers.ts`).
 */
import type { ChildProcess } from 'node:child_process';
import { freePort } from '@taskline/testing';
import {
  Cluster,
  exited,
  LONG,
  until,
  visibleStepViolation,
} from '../../../services/gpu-worker/test/helpers.js';
import { KEY_A, spawnApi, type ApiProcess } from '../../../services/api/test/helpers.js';

export { KEY_A, exited, until, visibleStepViolation };

/** A generation long enough to interrupt (see the gpu-worker fault tests). */
export const LONG_INPUT = LONG;

export interface Stack {
  cluster: Cluster;
  worker: ChildProcess;
  api: ApiProcess;
  port: number;
  base: string;
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

/** `env` goes to every process (api, scheduler, worker). */
export async function startStack(stepMs = '20', env: Record<string, string> = {}): Promise<Stack> {
  const cluster = await Cluster.start({ env });
  // A short drain deadline: a SIGTERM (interrupt) cuts the running attempt almost at once.
  const startWorker = (extra: Record<string, string> = {}) =>
    cluster.startWorker({ TASKLINE_WORKER_MIN_STEP_MS: stepMs, TASKLINE_DRAIN_DEADLINE_MS: '100', ...extra });
  const worker = startWorker();
  const port = await freePort();
  const apiEnv = { TASKLINE_PORT: String(port), TASKLINE_HOST: '127.0.0.1', ...env };
  const stack: Stack = {
    cluster,
    worker,
    api: await spawnApi(cluster.redis.url, apiEnv),
    port,
    base: `http://127.0.0.1:${port}`,
    async restartApi() {
      stack.api.child.kill('SIGKILL');
      await stack.api.exited;
      stack.api = await spawnApi(cluster.redis.url, apiEnv);
    },
    async interrupt(id, times) {
      for (let i = 0; i < times; i++) {
        const attempt = i + 1;
        await until(`attempt ${attempt} of ${id} to stream 20 tokens`, async () => {
          const task = await cluster.store.get(id);
          if (task?.attempt !== attempt || task.status !== 'running') return undefined;
          return (await cluster.store.snapshot(id)).length >= 20 ? true : undefined;
        });
        const stopping = stack.worker;
        stopping.kill(i % 2 === 0 ? 'SIGTERM' : 'SIGKILL');
        await exited(stopping);
        stack.worker = startWorker();
      }
    },
    async replaceWorker(env) {
      const stopping = stack.worker;
      stopping.kill('SIGTERM');
      await exited(stopping);
      stack.worker = startWorker(env);
    },
    async stop() {
      stack.api.child.kill('SIGKILL');
      await stack.api.exited;
      await cluster.stop();
    },
  };
  return stack;
}
