/**
 * The real Taskline stack for the conformance run and the MCP tests: a Redis with AOF, the
 * scheduler, a gpu-worker (which runs tool tasks from the `tools` queue) and any number of `api`
 * replicas serving `/mcp`, all as separate processes (`@taskline/testing`'s stack, with
 * `EngineStack` for a TaskStore on the same Redis).
 */
import type { ChildProcess } from 'node:child_process';
import { freePort } from '@taskline/testing';
import { EngineStack, until } from './engine-stack.js';
import { FIXTURE_ENTRIES, FIXTURE_TOOL_MODULE } from './entries.js';

export { EngineStack, until };

export interface Replica {
  /** The MCP endpoint of this api process. */
  url: string;
  process: ChildProcess;
}

/** Starts one `services/api` process and waits until it is up. */
export async function startApi(cluster: EngineStack, env: Record<string, string> = {}): Promise<Replica> {
  const api = cluster.stack.api(await freePort(), env);
  await api.up;
  return { url: `${api.base}/mcp`, process: api.child! };
}

/**
 * Starts a tool-worker process serving the conformance fixtures' tool module and waits until its
 * tools are announced (a replica lists them within its TASKLINE_TOOL_LIST_CACHE_MS after).
 */
export async function startFixtureToolWorker(cluster: EngineStack, env: Record<string, string> = {}) {
  const worker = cluster.stack.toolWorker(FIXTURE_TOOL_MODULE, {
    TASKLINE_SCHEDULER_ADDR: cluster.schedulerAddr,
    ...env,
  });
  await worker.up;
  return worker;
}

/**
 * The stack: Redis, one scheduler, one gpu-worker with the tiny model and the tools queue, and
 * `replicas` api processes. `env` goes to every process (auth mode, limits...); with `fixtures`
 * every api and worker (those `startApi` adds too) runs the `FIXTURE_ENTRIES`. With
 * `fixtureToolWorker` (and `fixtures`) a tool-worker process serves the durable fixtures instead:
 * the apis register only those that run on them.
 */
export async function startMcpStack(
  options: {
    replicas?: number;
    env?: Record<string, string>;
    workerEnv?: Record<string, string>;
    fixtures?: boolean;
    fixtureToolWorker?: boolean;
  } = {},
): Promise<{ cluster: EngineStack; replicas: Replica[]; worker: ChildProcess; stop(): Promise<void> }> {
  const cluster = await EngineStack.start({
    env: { ...options.env, ...(options.fixtureToolWorker && { CONFORMANCE_TASK_TOOLS: 'worker' }) },
    ...(options.fixtures && { entries: FIXTURE_ENTRIES }),
  });
  try {
    // Returned so that fault tests can kill it.
    const worker = cluster.startWorker(options.workerEnv);
    if (options.fixtureToolWorker) await startFixtureToolWorker(cluster);
    const replicas: Replica[] = [];
    for (let i = 0; i < (options.replicas ?? 1); i++) replicas.push(await startApi(cluster));
    return { cluster, replicas, worker, stop: () => cluster.stop() };
  } catch (err) {
    await cluster.stop();
    throw err;
  }
}

/** The env of the conformance run (with `fixtures`): no credentials (the suite sends none), a high rate. */
export const CONFORMANCE_ENV = {
  TASKLINE_MCP_LOCAL_NO_AUTH: '1',
  // Every scenario runs as the one local tenant, back to back: the 2025-11-25 set alone sends a few
  // hundred requests in seconds (handshakes included), past the default 20/s with a burst of 100.
  TASKLINE_RATE_LIMIT_PER_S: '1000',
  TASKLINE_RATE_LIMIT_BURST: '1000',
};
