// The gpu-worker tests' `EngineStack`, shared by every suite that drives the stack through the engine.
import type { ChildProcess } from 'node:child_process';
import { connectRedis, TaskStore, type TaskRecord } from '@taskline/engine';
import {
  freePort,
  startServices,
  until,
  type Service,
  type Stack,
  type StackOptions,
} from '@taskline/testing';

export const TERMINAL = ['succeeded', 'failed', 'cancelled'];

/** A stored event with its data parsed, as a client would read it. */
export type ParsedEvent = { seq: number; type: string } & Record<string, unknown>;

export { until };
export { exited } from '@taskline/testing';
/** LMSP 7.2's table as clients see it, for tests of packages that do not depend on the engine. */
export { visibleStepViolation } from '@taskline/engine';

/**
 * A `@taskline/testing` stack (real Redis with AOF, scheduler replicas and gpu-worker processes
 * started with `tsx`) plus a TaskStore on the same Redis for the test to create, cancel and
 * inspect tasks.
 */
export class EngineStack {
  /** The current process of each scheduler replica, by control port. */
  readonly schedulers = new Map<number, ChildProcess>();
  private readonly replicas = new Map<number, Service>();

  private constructor(
    readonly stack: Stack,
    readonly store: TaskStore,
    /** Env every process gets on top of its own defaults (Redis, lease). */
    private readonly env: Record<string, string>,
  ) {}

  get redis() {
    return this.stack.redis;
  }

  static async start(
    options: { schedulers?: number; env?: Record<string, string>; entries?: StackOptions['entries'] } = {},
  ): Promise<EngineStack> {
    const env = { TASKLINE_LEASE_MS: '1000', ...options.env };
    const stack = await startServices({ schedulers: 0, env, entries: options.entries });
    const redis = connectRedis(stack.redis.url, 'test');
    // Tests kill Redis on purpose: this connection reconnects on its own, and an error event with
    // no listener would only print ioredis's "Unhandled error event" into the test's output.
    redis.on('error', () => undefined);
    const store = new TaskStore(redis, {
      taskRetentionMs: 3_600_000,
      eventRetentionMs: 3_600_000,
      idempotencyTtlS: 86_400,
      idempotencyPendingMs: 30_000,
    });
    const cluster = new EngineStack(stack, store, env);
    // Several replicas: one leads, the others stand by and redirect workers.
    for (let i = 0; i < (options.schedulers ?? 1); i++) cluster.restartScheduler(await freePort());
    return cluster;
  }

  /** Starts a scheduler replica on `port` (again, after the test killed the one there). */
  restartScheduler(port: number): void {
    let replica = this.replicas.get(port);
    if (replica) void replica.start();
    else {
      replica = this.stack.scheduler(port, {
        TASKLINE_HEARTBEAT_MS: '100',
        TASKLINE_DISPATCH_INTERVAL_MS: '20',
        TASKLINE_LEADER_LEASE_MS: '1000',
        ...this.env, // the cluster's env overrides these defaults
      });
      this.replicas.set(port, replica);
    }
    this.schedulers.set(port, replica.child!);
  }

  /** Every scheduler replica's warnings and errors so far: what a failed wait on dispatch reports. */
  schedulerWarnings(): Record<string, unknown>[] {
    return [...this.replicas.values()].flatMap((r) =>
      r.logs.filter((l) => l.level === 'warn' || l.level === 'error'),
    );
  }

  get schedulerAddr(): string {
    return [...this.schedulers.keys()].map((p) => `127.0.0.1:${p}`).join(',');
  }

  startWorker(env: Record<string, string> = {}): ChildProcess {
    return this.stack.worker({
      TASKLINE_SCHEDULER_ADDR: this.schedulerAddr,
      TASKLINE_WORKER_MODELS: 'tiny-chat',
      TASKLINE_WORKER_SLOTS: '2',
      ...env,
    }).child!;
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
    this.store.redis.disconnect();
    await this.stack.stop();
  }
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

export { LONG } from '@taskline/testing';
