// GpuWorker: a TaskWorker that serves models (and the built-in tools' queue): loads, generates, drains.
import { TOOLS_MODEL, type ControlSecurity, type ModelSlots } from '@taskline/control';
import {
  emptyResponse,
  TasklineError,
  type RedisTarget,
  type RunContext,
  type RunOutcome,
  type TaskRunner,
  type TaskStore,
} from '@taskline/engine';
import { ModelThreadDiedError, type ModelBackend, type ModelLease } from '@taskline/inference';
import type { Logger } from '@taskline/log';
import type { TasklineMetrics } from '@taskline/metrics';
import { TaskWorker } from '@taskline/task-worker';
import { inSpan, timeGeneration } from '@taskline/tracing';
import { createResponseRunner, FlushClock } from './response.js';

export { shareSlots } from '@taskline/task-worker';

/** The token counts of a response's `usage`: what its prefill and decode spans carry. */
type TokenUsage = { input_tokens?: number; output_tokens?: number };

export interface GpuWorkerOptions {
  id: string;
  /** Where Redis is, for the BullMQ connections (one per BullMQ worker). */
  redisTarget: RedisTarget;
  store: TaskStore;
  log: Logger;
  metrics: TasklineMetrics;
  /** Model ids this worker serves (each with `slots` concurrent generations). */
  models: string[];
  slots: number;
  /** BullMQ workers per model sharing its slots, so a burst of jobs is taken in parallel. Default 1. */
  fetchers?: number;
  /** Loads (or finds loaded) the backend of a model; the task shows `loading` meanwhile. */
  acquire: (model: string) => Promise<ModelLease<ModelBackend>>;
  /** Whether a model is loaded now: its tasks are claimed straight into `running`. */
  isLoaded: (model: string) => boolean;
  /** Runs MCP tool tasks from the `tools` queue; absent, this worker does not serve it. */
  toolRunner?: TaskRunner;
  leaseMs: number;
  /** Time between a generation's delta appends, on one clock for all of them (see FlushClock). */
  flushMs?: number;
  schedulerAddrs: string[];
  /** The control-plane credential, and what to do when a scheduler refuses this worker for good. */
  controlSecurity: ControlSecurity;
  onControlRefused: (message: string) => void;
  /** Called once a drain has finished (SIGTERM or a scheduler command). */
  onDrained?: () => void;
}

/** This worker could not load a task's model: its failure, not the task's. */
class ModelLoadError extends Error {}

/**
 * One gpu-worker process: the shared task loop (`TaskWorker`: claim, lease, fence, on_restart,
 * drain, cancel) over its models' queues and the built-in tools' queue; an attempt here loads the
 * task's model and generates, or runs a built-in tool.
 */
export class GpuWorker {
  private readonly core: TaskWorker;
  /** One flush timer for every generation this worker streams. */
  private readonly flushClock: FlushClock;

  /** Whether a scheduler has welcomed this worker: its slots count (the worker's `/readyz`). */
  get registered(): boolean {
    return this.core.registered;
  }

  constructor(private readonly o: GpuWorkerOptions) {
    this.flushClock = new FlushClock(o.flushMs ?? 0);
    const served = o.toolRunner ? [...o.models, TOOLS_MODEL] : o.models;
    this.core = new TaskWorker({
      ...o,
      queues: served.map((model) => ({ model, slots: o.slots })),
      run: (ctx, model) => this.attempt(ctx, model),
      startsRunning: (model) => model === TOOLS_MODEL || o.isLoaded(model),
      // A generation on a loaded model starts before its claim and claims with its first delta.
      startsBeforeClaim: (task, model) =>
        task.kind === 'response' && model !== TOOLS_MODEL && o.isLoaded(model),
      workerFault: (err, model) => this.workerFault(err, model),
    });
  }

  slots(): ModelSlots[] {
    return this.core.slots();
  }

  start(): Promise<void> {
    return this.core.start();
  }

  drain(deadlineMs: number): Promise<void> {
    return this.core.drain(deadlineMs);
  }

  /**
   * Its model thread died under the attempt (out of memory, a bug in it) or its model would not
   * load: the worker's failure, not the task's. A model that does not load here (files missing or
   * corrupt, no device) would fail every task this worker takes, and its free slots would draw
   * more: the worker stops taking that model's jobs until the process restarts.
   */
  private workerFault(err: unknown, model: string): boolean {
    if (err instanceof ModelLoadError) this.core.stopTaking(model, 'model_unloadable', err);
    return err instanceof ModelThreadDiedError || err instanceof ModelLoadError;
  }

  private async attempt(ctx: RunContext, model: string): Promise<RunOutcome> {
    const { task, attempt, signal, store } = ctx;
    if (task.kind === 'tool') {
      if (!this.o.toolRunner)
        throw new TasklineError('internal_error', 'this worker does not run tool tasks');
      if (task.status !== 'running') await store.start(task.id, attempt, task.shownStatus);
      return this.o.toolRunner.run(ctx);
    }
    const lease = await inSpan('task.model_load', {}, () =>
      this.o.acquire(task.model).catch((err: unknown) => {
        throw new ModelLoadError(err instanceof Error ? err.message : String(err), { cause: err });
      }),
    );
    try {
      if (signal.aborted) return { status: 'cancelled', result: emptyResponse(task, 'cancelled') };
      if (task.status !== 'running') await store.start(task.id, attempt, task.shownStatus);
      const { metrics } = this.o;
      const timed = timeGeneration();
      const outcome = await createResponseRunner(lease.model, {
        clock: this.flushClock,
        retryUnavailableMs: this.o.leaseMs,
        // A retried attempt observes its first token again, from creation: what its client waited.
        onFirstToken: () => {
          timed.firstToken();
          metrics.timeToFirstTokenSeconds.observe(
            { model },
            Math.max(0, (Date.now() - task.createdAt) / 1000),
          );
        },
        // Counted as made, not at the attempt's end: a long generation shows as a steady rate.
        onTokens: (count) =>
          metrics.outputTokensTotal.inc({ model, tenant: metrics.tenant(task.tenant) }, count),
        onGenerated: (tokens, secondsAfterFirst) => {
          if (tokens > 1 && secondsAfterFirst > 0)
            metrics.outputTokensPerSecond.observe({ model }, (tokens - 1) / secondsAfterFirst);
        },
      }).run(ctx);
      timed.end(
        'result' in outcome ? (outcome.result as { usage?: TokenUsage } | undefined)?.usage : undefined,
      );
      return outcome;
    } finally {
      await lease.release();
    }
  }
}
