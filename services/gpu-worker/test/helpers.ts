import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { connectRedis, TaskStore, type TaskRecord } from '@taskline/engine';
import { freePort, startRedis, until, type RedisServer } from '@taskline/testing';

const root = fileURLToPath(new URL('../../../', import.meta.url));

export const TERMINAL = ['succeeded', 'failed', 'cancelled'];

/** A stored event with its data parsed, as a client would read it. */
export type ParsedEvent = { seq: number; type: string } & Record<string, unknown>;

export { until };
/** LMSP 7.2's table as clients see it, for tests of packages that do not depend on the engine. */
export { visibleStepViolation } from '@taskline/engine';

/**
 * A real Redis (AOF), scheduler replicas and gpu-worker processes started with `tsx`, plus a
 * TaskStore on the same Redis for the test to create, cancel and inspect tasks.
 */
export class Cluster {
  readonly schedulers = new Map<number, ChildProcess>();
  private readonly procs: ChildProcess[] = [];

  private constructor(
    readonly redis: RedisServer,
    readonly store: TaskStore,
    /** Env every process gets (Redis, lease). */
    readonly common: Record<string, string>,
  ) {}

  static async start(options: { schedulers?: number; env?: Record<string, string> } = {}): Promise<Cluster> {
    const redis = await startRedis();
    const store = new TaskStore(connectRedis(redis.url, 'test'), {
      taskRetentionMs: 3_600_000,
      eventRetentionMs: 3_600_000,
      idempotencyTtlS: 86_400,
      idempotencyPendingMs: 30_000,
    });
    const cluster = new Cluster(redis, store, {
      REDIS_URL: redis.url,
      TASKLINE_METRICS_PORT: '0',
      TASKLINE_LEASE_MS: '1000',
      ...options.env,
    });
    // Several replicas: one leads, the others stand by and redirect workers.
    for (let i = 0; i < (options.schedulers ?? 1); i++) cluster.restartScheduler(await freePort());
    return cluster;
  }

  /** Starts a scheduler replica on `port` (again, after the test killed the one there). */
  restartScheduler(port: number): void {
    this.schedulers.set(
      port,
      this.spawn('services/scheduler/src/main.ts', {
        TASKLINE_CONTROL_PORT: String(port),
        TASKLINE_HEARTBEAT_MS: '100',
        TASKLINE_DISPATCH_INTERVAL_MS: '20',
        TASKLINE_LEADER_LEASE_MS: '1000',
        ...this.common, // the cluster's env overrides these defaults
      }),
    );
  }

  get schedulerAddr(): string {
    return [...this.schedulers.keys()].map((p) => `127.0.0.1:${p}`).join(',');
  }

  spawn(entry: string, env: Record<string, string>): ChildProcess {
    const child = spawn(process.execPath, ['--import', 'tsx', entry], {
      cwd: root,
      env: { ...process.env, ...this.common, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    child.stdout?.resume();
    this.procs.push(child);
    return child;
  }

  startWorker(env: Record<string, string> = {}): ChildProcess {
    return this.spawn('services/gpu-worker/src/main.ts', {
      TASKLINE_SCHEDULER_ADDR: this.schedulerAddr,
      TASKLINE_WORKER_MODELS: 'tiny-chat',
      TASKLINE_WORKER_SLOTS: '2',
      ...env,
    });
  }

  async create(
    request: Record<string, unknown>,
    options: { model?: string; onRestart?: TaskRecord['onRestart'] } = {},
  ) {
    const model = options.model ?? 'tiny-chat';
    return this.store.create({
      tenant: 't1',
      kind: 'response',
      model,
      onRestart: options.onRestart ?? 'fail',
      request: { model, ...request },
    });
  }

  waitFor(
    id: string,
    what: string,
    done: (t: TaskRecord) => boolean,
    timeoutMs?: number,
  ): Promise<TaskRecord> {
    return until(
      `task ${id}: ${what}`,
      async () => {
        const task = await this.store.get(id);
        return task && done(task) ? task : undefined;
      },
      timeoutMs,
    );
  }

  waitForEnd(id: string, timeoutMs?: number): Promise<TaskRecord> {
    return this.waitFor(id, 'a terminal status', (t) => TERMINAL.includes(t.status), timeoutMs);
  }

  /** Waits until the running attempt has stored at least `count` output tokens. */
  waitForTokens(id: string, count: number): Promise<number[]> {
    return until(`task ${id} to have ${count} output tokens stored`, async () => {
      const tokens = await this.store.snapshot(id);
      return tokens.length >= count ? tokens : undefined;
    });
  }

  async events(id: string): Promise<ParsedEvent[]> {
    const { events } = await this.store.events(id, 0);
    return events.map((e) => ({
      seq: e.seq,
      type: e.type,
      ...(JSON.parse(e.data) as Record<string, unknown>),
    }));
  }

  /** Creates a task and waits for its end: its record and its whole event history. */
  async run(
    request: Record<string, unknown>,
    options: { model?: string; onRestart?: TaskRecord['onRestart'] } = {},
  ) {
    const created = await this.create(request, options);
    const task = await this.waitForEnd(created.id);
    return { task, events: await this.events(task.id) };
  }

  async stop(): Promise<void> {
    for (const p of this.procs) p.kill('SIGKILL');
    this.store.redis.disconnect();
    await this.redis.stop();
  }
}

/** Resolves with the exit code (or signal) of a child process, at once if it already exited. */
export function exited(child: ChildProcess): Promise<number | NodeJS.Signals | null> {
  if (child.exitCode !== null || child.signalCode !== null)
    return Promise.resolve(child.exitCode ?? child.signalCode);
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
}

/** The text a client rebuilds from the deltas of an event history. */
export function deltaText(events: ParsedEvent[]): string {
  return events
    .filter((e) => e.type === 'response.output_text.delta')
    .map((e) => e.delta as string)
    .join('');
}

/** The text of a response object's first output item. */
export function outputText(result: unknown): string {
  return (result as { output: { content: { text: string }[] }[] }).output[0]!.content[0]!.text;
}

/**
 * Seed 22 at temperature 2 makes the tiny model ramble for ~125 tokens before it stops; with
 * TASKLINE_WORKER_MIN_STEP_MS a generation lasts seconds, long enough to cancel, kill or drain.
 */
export const LONG = {
  model: 'tiny-chat',
  input: 'Tell me a long story about the sea.',
  seed: 22,
  temperature: 2,
  max_output_tokens: 200,
};
