/**
 * The running stack the client and CLI tests talk to, from the colleagues' own helpers: a real
 * Redis, scheduler and gpu-worker (`services/gpu-worker/test/helpers.ts`) and real `api`
 * processes (`services/api/test/helpers.ts`).
 */
import type { ChildProcess } from 'node:child_process';
import { freePort } from '@taskline/testing';
import { Cluster, exited, LONG, until } from '../../../services/gpu-worker/test/helpers.js';
import { KEY_A, spawnApi, type ApiProcess } from '../../../services/api/test/helpers.js';

export { KEY_A, exited, until };

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
  stop(): Promise<void>;
}

/** `env` goes to every process (api, scheduler, worker). */
export async function startStack(stepMs = '20', env: Record<string, string> = {}): Promise<Stack> {
  const cluster = await Cluster.start({ env });
  const worker = cluster.startWorker({ TASKLINE_WORKER_MIN_STEP_MS: stepMs });
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
    async stop() {
      stack.api.child.kill('SIGKILL');
      await stack.api.exited;
      await cluster.stop();
    },
  };
  return stack;
}
