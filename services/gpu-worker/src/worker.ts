import { randomUUID } from 'node:crypto';
import { Worker, type Job } from 'bullmq';
import {
  connectControl,
  modelQueueName,
  queuePrefix,
  TOOLS_MODEL,
  type ControlClient,
  type ControlSecurity,
  type DispatchJob,
  type ModelSlots,
} from '@taskline/control';
import {
  connectQueueRedis,
  emptyResponse,
  isTerminal,
  isRedisUnavailable,
  problem,
  TasklineError,
  type EventInput,
  type Finish,
  type RunContext,
  type RedisTarget,
  type RestartReason,
  type RunOutcome,
  type TaskRecord,
  type TaskRunner,
  type TaskStore,
  subscribeCancels,
  taskStatuses,
} from '@taskline/engine';
import type { Redis } from 'ioredis';
import { ModelThreadDiedError, type ModelBackend, type ModelLease } from '@taskline/inference';
import type { Logger } from '@taskline/log';
import type { TasklineMetrics } from '@taskline/metrics';
import { whenRedisAnswers } from './redis-retry.js';
import { createResponseRunner, FlushClock } from './response.js';

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

type StopReason = 'cancel' | 'lost' | 'drain';

/** This worker could not load a task's model: its failure, not the task's. */
class ModelLoadError extends Error {}

/** How long past its deadline a drain waits for its last Redis writes before the worker exits anyway. */
const DRAIN_GRACE_MS = 5000;

/**
 * Events an attempt carries into a cancelled end (text no append could write, closing events) are
 * written while the task is `cancelling`, after the event that said so: they say so too, so that a
 * reader following `task_status` never sees the task step back to `running`.
 */
const whileCancelling = (events: EventInput[] | undefined) =>
  events?.map((e) => ({ ...e, data: { ...e.data, task_status: 'cancelling' } }));

/** `slots` shared out among at most `fetchers` BullMQ workers, each with one slot or more: [3, 3, 2, 2] for 10 and 4. */
export function shareSlots(slots: number, fetchers: number): number[] {
  const n = Math.max(1, Math.min(slots, fetchers));
  return Array.from({ length: n }, (_, i) => Math.floor(slots / n) + (i < slots % n ? 1 : 0));
}

interface Running {
  model: string;
  stop(reason: StopReason): void;
  /** Settles once its claim did: true when it took the task. */
  claimed: Promise<boolean>;
}

/**
 * One gpu-worker process: takes jobs from its models' BullMQ queues, runs each task attempt
 * under a renewed lease, stops on cancel or lost lease, and on drain stops taking work and
 * restarts what did not finish by the deadline under its own `on_restart` policy.
 */
export class GpuWorker {
  private readonly workers: Worker[] = [];
  /** The BullMQ workers' connections, closed after them (BullMQ leaves a connection it was given open). */
  private readonly queueConnections: Redis[] = [];
  private readonly running = new Map<string, Running>();
  private readonly busy = new Map<string, number>();
  /** Models this worker failed to load: it takes no more of their jobs until it restarts. */
  private readonly unloadable = new Set<string>();
  private control: ControlClient | null = null;
  private draining: Promise<void> | null = null;
  private cancels: Redis | null = null;
  private reportDue = false;
  /** Leases renewed since start, reported in heartbeats (the operator console shows it); wraps at 2^32. */
  private leaseRenewals = 0;

  /** One flush timer for every generation this worker streams. */
  private readonly flushClock: FlushClock;

  /** Whether a scheduler has welcomed this worker: its slots count (the worker's `/readyz`). */
  get registered(): boolean {
    return this.control?.connectedTo != null;
  }

  constructor(private readonly o: GpuWorkerOptions) {
    this.flushClock = new FlushClock(o.flushMs ?? 0);
  }

  private get served(): string[] {
    return this.o.toolRunner ? [...this.o.models, TOOLS_MODEL] : this.o.models;
  }

  slots(): ModelSlots[] {
    return this.served.map((model) => ({
      model,
      slots: this.o.slots,
      free: this.draining || this.unloadable.has(model) ? 0 : this.o.slots - (this.busy.get(model) ?? 0),
    }));
  }

  private queueConnection(): Redis {
    const connection = connectQueueRedis(this.o.redisTarget, `${this.o.id}-queue`);
    this.queueConnections.push(connection);
    return connection;
  }

  /** Listens for cancels of the tasks it will hold, then starts taking jobs. */
  async start(): Promise<void> {
    await this.listenForCancels();
    for (const model of this.served) {
      // A BullMQ worker takes its jobs one round trip after another (16 at once took 16 in a row
      // before the last could start); its share of the slots goes to each of several instead.
      for (const concurrency of shareSlots(this.o.slots, this.o.fetchers ?? 1)) {
        const worker = new Worker(modelQueueName(model), (job: Job<DispatchJob>) => this.runJob(model, job), {
          connection: this.queueConnection() as never,
          prefix: queuePrefix(model),
          concurrency,
          // Leases, not BullMQ locks, decide who runs a task: a dead worker's job is just dropped.
          maxStalledCount: 0,
          removeOnComplete: { count: 0 },
          removeOnFail: { count: 0 },
        });
        worker.on('error', (err) => this.o.log.warn('queue_error', { model, error: err }));
        this.workers.push(worker);
      }
    }
    this.control = connectControl({
      addresses: this.o.schedulerAddrs,
      workerId: this.o.id,
      security: this.o.controlSecurity,
      onRefused: this.o.onControlRefused,
      slots: () => this.slots(),
      draining: () => this.draining !== null,
      leaseRenewals: () => this.leaseRenewals,
      onDrain: (deadlineMs) => void this.drain(deadlineMs),
      onEvent: (event, fields) => this.o.log.info(event, fields),
    });
    this.reportSlots();
  }

  /**
   * cancel.lua announces a task going `cancelling` on the channel of the worker holding it. After a
   * reconnect, announcements sent meanwhile are lost: the running tasks' statuses are read instead.
   * The lease renewal (every third of the lease) and refused appends catch a cancel as well.
   */
  private async listenForCancels(): Promise<void> {
    const name = this.o.store.redis.options.connectionName;
    const sub = this.o.store.redis.duplicate({
      connectionName: name ? `${name}-cancels` : undefined,
      enableReadyCheck: false,
      enableAutoPipelining: false,
      // No retry limit: ioredis re-subscribes on its own after a reconnect, with no caller to catch
      // a MaxRetriesPerRequestError should Redis drop again first (it would end the process).
      maxRetriesPerRequest: null,
    });
    this.cancels = sub;
    sub.on('error', () => undefined); // reconnects on its own; 'ready' re-reads the statuses
    sub.on('message', (_channel: string, taskId: string) => this.running.get(taskId)?.stop('cancel'));
    sub.on('ready', () => {
      const held = [...this.running];
      taskStatuses(
        this.o.store.redis,
        held.map(([id]) => id),
      ).then(
        (statuses) => held.forEach(([, r], i) => statuses[i] === 'cancelling' && r.stop('cancel')),
        () => undefined,
      );
    });
    await subscribeCancels(sub, this.o.id);
  }

  /**
   * Reports free slots (metrics and the scheduler) once per turn of the event loop: jobs that
   * start and end together, as a batch of Redis replies makes them, cost one report, not one each.
   */
  private reportSlots(): void {
    if (this.reportDue) return;
    this.reportDue = true;
    setImmediate(() => {
      this.reportDue = false;
      this.sendSlots();
    });
  }

  private sendSlots(): void {
    for (const s of this.slots()) {
      this.o.metrics.workerSlots.set({ model: s.model, state: 'free' }, s.free);
      this.o.metrics.workerSlots.set({ model: s.model, state: 'busy' }, this.busy.get(s.model) ?? 0);
    }
    this.control?.report();
  }

  private async runJob(model: string, job: Job<DispatchJob>): Promise<void> {
    this.busy.set(model, (this.busy.get(model) ?? 0) + 1);
    this.reportSlots();
    try {
      await this.execute(model, job.data);
    } finally {
      this.busy.set(model, (this.busy.get(model) ?? 1) - 1);
      this.reportSlots();
    }
  }

  /** Runs one attempt of a task from claim to its end; never throws. */
  private async execute(model: string, { taskId, attempt: offered }: DispatchJob): Promise<void> {
    const { store, log, leaseMs } = this.o;
    // A second job for a task this worker runs already is a stale hint. One whose claim is still in
    // flight may be the stale one instead (an older offer, to be refused): this job waits for it.
    for (let here = this.running.get(taskId); here; here = this.running.get(taskId)) {
      if (await here.claimed) {
        log.info('claim_refused', { task: taskId, reason: 'running here' });
        return;
      }
    }
    const controller = new AbortController();
    let reason: StopReason | null = null;
    let tlog = log.child({ task: taskId });
    const stop = (r: StopReason) => {
      if (reason) return;
      reason = r;
      tlog.info('attempt_stopping', { reason: r });
      controller.abort(r);
    };
    let settle!: (claimed: boolean) => void;
    const claimed = new Promise<boolean>((resolve) => (settle = resolve));
    // Listed before the claim: a cancel announced right after the claim must find its attempt.
    this.running.set(taskId, { model, stop, claimed });
    let task: TaskRecord;
    try {
      const start = model === TOOLS_MODEL || this.o.isLoaded(model);
      // Made again with the same nonce while Redis is unavailable: a claim that ran though its
      // caller saw it fail (an auto-pipeline aborted by a reset) is then recognised, not orphaned.
      const nonce = randomUUID();
      task = await whenRedisAnswers(this.o.leaseMs, () =>
        store.claim(taskId, this.o.id, leaseMs, { start, offered, nonce }),
      );
      settle(true);
    } catch (err) {
      this.running.delete(taskId);
      settle(false);
      // Already taken, cancelled or gone, or queued again since its offer: the job was a stale hint.
      log.info('claim_refused', { task: taskId, error: err });
      return;
    }
    const attempt = task.attempt;
    tlog = log.child({ task: taskId, attempt });
    this.o.metrics.queueWaitSeconds.observe(
      { kind: task.kind, model },
      Math.max(0, (Date.now() - task.createdAt) / 1000),
    );
    const renew = setInterval(
      () => {
        store.renew(taskId, attempt, leaseMs).then(
          (status) => {
            this.leaseRenewals = (this.leaseRenewals + 1) >>> 0;
            if (status === 'cancelling') stop('cancel');
            else if (task.parent) this.cancelOrphan(task, tlog);
          },
          (err: unknown) => {
            if (err instanceof TasklineError) stop('lost');
            else tlog.warn('renew_failed', { error: err });
          },
        );
      },
      Math.max(10, Math.floor(leaseMs / 3)),
    );
    let finish: RunOutcome;
    // Its model thread died under the attempt (out of memory, a bug in it) or its model would not
    // load: the worker's failure, not the task's, so the task gets its on_restart policy as if the
    // whole worker had died.
    let modelDied = false;
    // Redis could not take a write (an outage, a reset connection, BUSY/LOADING/OOM): the attempt
    // is lost, not the task's failure: its on_restart policy applies (docs/redis-faults.md).
    let redisDown = false;
    try {
      finish = await this.attempt(task, attempt, model, controller.signal);
    } catch (err) {
      modelDied = err instanceof ModelThreadDiedError || err instanceof ModelLoadError;
      if (err instanceof ModelLoadError) this.stopServing(model, err);
      redisDown = isRedisUnavailable(err);
      if (err instanceof TasklineError && (err.code === 'stale_attempt' || err.code === 'task_terminal'))
        stop('lost');
      else if (err instanceof TasklineError && err.code === 'illegal_transition') stop('cancel');
      // A request the model cannot run keeps its own code (say invalid_request); the rest is ours.
      finish = {
        status: 'failed',
        error:
          err instanceof TasklineError
            ? problem(err.code, err.message, err.status)
            : problem('internal_error', err instanceof Error ? err.message : String(err)),
      };
      // A request the model cannot run is the caller's to fix: a warning, not an error.
      const callers = err instanceof TasklineError && err.status < 500;
      if (redisDown) tlog.warn('attempt_interrupted', { error: err });
      else if (!reason) tlog[callers ? 'warn' : 'error']('attempt_failed', { error: err });
    } finally {
      clearInterval(renew);
      this.running.delete(taskId);
    }
    // Parked for its caller's input: the task is no longer this attempt's to write.
    if (finish.status === 'parked') tlog.info('attempt_parked');
    else await this.commit(task, attempt, finish, reason, tlog, modelDied || redisDown);
  }

  private async attempt(
    task: TaskRecord,
    attempt: number,
    model: string,
    signal: AbortSignal,
  ): Promise<RunOutcome> {
    const { store } = this.o;
    const ctx: RunContext = { task, attempt, signal, store };
    if (task.kind === 'tool') {
      if (!this.o.toolRunner)
        throw new TasklineError('internal_error', 'this worker does not run tool tasks');
      if (task.status !== 'running') await store.start(task.id, attempt, task.shownStatus);
      return this.o.toolRunner.run(ctx);
    }
    const lease = await this.o.acquire(task.model).catch((err: unknown) => {
      throw new ModelLoadError(err instanceof Error ? err.message : String(err), { cause: err });
    });
    try {
      if (signal.aborted) return { status: 'cancelled', result: emptyResponse(task, 'cancelled') };
      if (task.status !== 'running') await store.start(task.id, attempt, task.shownStatus);
      const { metrics } = this.o;
      return await createResponseRunner(lease.model, {
        clock: this.flushClock,
        retryUnavailableMs: this.o.leaseMs,
        // A retried attempt observes its first token again, from creation: what its client waited.
        onFirstToken: () =>
          metrics.timeToFirstTokenSeconds.observe(
            { model },
            Math.max(0, (Date.now() - task.createdAt) / 1000),
          ),
        // Counted as made, not at the attempt's end: a long generation shows as a steady rate.
        onTokens: (count) =>
          metrics.outputTokensTotal.inc({ model, tenant: metrics.tenant(task.tenant) }, count),
        onGenerated: (tokens, secondsAfterFirst) => {
          if (tokens > 1 && secondsAfterFirst > 0)
            metrics.outputTokensPerSecond.observe({ model }, (tokens - 1) / secondsAfterFirst);
        },
      }).run(ctx);
    } finally {
      await lease.release();
    }
  }

  /**
   * A model that does not load here (files missing or corrupt, no device) would fail every task
   * this worker takes, and its free slots would draw more: it stops taking that model's jobs
   * (paused fetchers, no free slots reported) until the process restarts, and leaves them to the
   * workers that can load it.
   */
  private stopServing(model: string, err: ModelLoadError): void {
    if (this.unloadable.has(model)) return;
    this.unloadable.add(model);
    this.o.log.error('model_unloadable', { model, error: err });
    for (const w of this.workers)
      if (w.name === modelQueueName(model)) void w.pause(true).catch(() => undefined);
    this.reportSlots();
  }

  /**
   * A child generation is cancelled by its parent's running attempt. A parent that ended, or is
   * being cancelled, with no attempt running it (its worker died) cancels nothing: the child's own
   * worker does, at a lease renewal, since nobody will read what it generates.
   */
  private cancelOrphan(task: TaskRecord, log: Logger): void {
    taskStatuses(this.o.store.redis, [task.parent!])
      .then(async ([parent]) => {
        if (parent && parent !== 'cancelling' && !isTerminal(parent)) return;
        log.info('orphan_cancelled', { parent: task.parent, parent_status: parent });
        await this.o.store.cancel(task.id, task.tenant);
      })
      .catch((err: unknown) => log.warn('orphan_check_failed', { error: err }));
  }

  /** Writes how the attempt ended, unless it no longer owns the task. */
  private async commit(
    task: TaskRecord,
    attempt: number,
    finish: Finish,
    reason: StopReason | null,
    log: Logger,
    workerLost: boolean,
  ): Promise<void> {
    const { store } = this.o;
    if (reason === 'lost') return;
    try {
      // Unfinished at the drain deadline, or lost to its model's death or to Redis: the task's own
      // on_restart policy, as after a crash. A generation that completed as the deadline struck is
      // finished, and committed as such.
      const restart: RestartReason | null =
        reason === 'drain' && finish.status !== 'succeeded'
          ? 'worker_draining'
          : workerLost
            ? 'worker_lost'
            : null;
      if (restart) {
        const restarted = await whenRedisAnswers(this.o.leaseMs, () =>
          store.restart(task.id, attempt, restart),
        );
        log.info(restart === 'worker_draining' ? 'restarted_at_drain' : 'restarted_after_worker_lost', {
          status: restarted?.status,
          policy: restarted?.policy,
        });
        return;
      }
      try {
        const end =
          finish.status === 'cancelled' ? { ...finish, events: whileCancelling(finish.events) } : finish;
        await whenRedisAnswers(this.o.leaseMs, () => store.finish(task.id, attempt, end, task));
      } catch (err) {
        // A cancel came in first (the task is `cancelling`): it ends cancelled, with what was
        // produced, and the events that were to close the stream (its last deltas among them).
        if (!(err instanceof TasklineError) || err.code !== 'illegal_transition') throw err;
        const result =
          finish.result && typeof finish.result === 'object'
            ? { ...finish.result, status: 'cancelled' }
            : undefined;
        await store.finish(
          task.id,
          attempt,
          {
            status: 'cancelled',
            result: task.kind === 'response' ? (result ?? emptyResponse(task, 'cancelled')) : result,
            events: whileCancelling(finish.events),
          },
          task,
        );
      }
      log.info('attempt_finished', { status: finish.status });
    } catch (err) {
      // Another attempt took over (the lease lapsed) or the task ended meanwhile: not ours to write.
      const lost =
        err instanceof TasklineError && (err.code === 'stale_attempt' || err.code === 'task_terminal');
      if (lost) log.info('attempt_lost', { error: err });
      else log.warn('commit_failed', { error: err });
    }
  }

  /**
   * Stops taking work, lets running tasks finish until `deadlineMs`, then stops the rest and
   * applies each one's `on_restart` policy at once (LMSP 7.5: `fail` fails it with
   * `server_restarted`, `retry` and `resume` queue a new attempt), so nothing waits for the
   * recovery sweep.
   */
  drain(deadlineMs: number): Promise<void> {
    if (this.draining) return this.draining;
    this.o.log.info('draining', { deadline_ms: deadlineMs, running: this.running.size });
    const timer = setTimeout(() => {
      for (const r of this.running.values()) r.stop('drain');
    }, deadlineMs);
    this.draining = (async () => {
      this.reportSlots();
      // Bounded: an attempt's last writes (its end, BullMQ's job) wait on Redis, and a Redis that
      // stalls (paused, a cluster node lost mid-failover) would hold the process forever. Past
      // the deadline and a grace, the worker goes anyway: the tasks it could not hand back keep
      // their lease, whose lapse gives each its on_restart policy through the recovery sweep.
      let graceTimer: NodeJS.Timeout | undefined;
      const grace = new Promise<false>((resolve) => {
        graceTimer = setTimeout(resolve, deadlineMs + DRAIN_GRACE_MS, false);
      });
      const closed = Promise.all(this.workers.map((w) => w.close())).then(() => true);
      if (!(await Promise.race([closed, grace])))
        this.o.log.warn('drain_forced', { grace_ms: DRAIN_GRACE_MS, running: [...this.running.keys()] });
      clearTimeout(graceTimer);
      for (const connection of this.queueConnections) connection.disconnect();
      clearTimeout(timer);
      this.control?.close();
      this.cancels?.disconnect();
      this.o.log.info('drained');
      this.o.onDrained?.();
    })();
    return this.draining;
  }
}
