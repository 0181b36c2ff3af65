/**
 * The worker core both worker services share (the gpu-worker and the tool-worker): takes jobs from
 * BullMQ queues, claims each task under a renewed lease, fences every write by attempt, commits the
 * end or applies `on_restart`, hears cancels, reports slots to the scheduler and drains on SIGTERM.
 * What an attempt does is the service's (`run`).
 */
import { randomUUID } from 'node:crypto';
import {
  activeSpan,
  ATTR,
  contextOf,
  inSpan,
  previousAttemptLink,
  SpanKind,
  taskAttributes,
  traceparentOf,
} from '@taskline/tracing';
import type { Job, Worker } from 'bullmq';
import {
  connectControl,
  modelQueueName,
  queuePrefix,
  type ControlClient,
  type ControlSecurity,
  type DispatchJob,
  type ModelSlots,
} from '@taskline/control';
import {
  connectQueueRedis,
  carriedRecord,
  emptyResponse,
  isTerminal,
  isRedisUnavailable,
  problem,
  TasklineError,
  type EventInput,
  type Finish,
  type FirstOutput,
  type RunContext,
  type RedisTarget,
  type RestartReason,
  type RunOutcome,
  type TaskRecord,
  type TaskStore,
  subscribeCancels,
  taskStatuses,
} from '@taskline/engine';
import type { Redis } from 'ioredis';
import { HTTP_STATUS, isCallersFault } from '@taskline/lmsp';
import type { Logger } from '@taskline/log';
import type { TasklineMetrics } from '@taskline/metrics';
import { Fetcher } from './fetcher.js';
import { whenRedisAnswers } from './redis-retry.js';

/**
 * One job's attempt as a span of its task's trace: a consumer span under the scheduler's hand-off
 * (the context the job carries), linked to the task's previous attempt. A job without one (tracing
 * off where it was dispatched) runs untraced rather than starting a trace of its own.
 */
function traceAttempt(job: DispatchJob, model: string, work: () => Promise<void>): Promise<void> {
  if (!job.traceparent) return work();
  const attributes = taskAttributes({ id: job.taskId, tenant: job.tenant, model });
  const links = previousAttemptLink(job.previous);
  return inSpan(
    'task.attempt',
    { parent: contextOf(job.traceparent), kind: SpanKind.CONSUMER, attributes, links },
    work,
  );
}

/** A queue (a model id: `tiny-chat`, `tools`, `tool:<name>`) and the tasks of it one worker runs at once. */
export interface QueueSlots {
  model: string;
  slots: number;
}

/** Runs one attempt of a claimed task (`loading` or `running`); its outcome is committed by the core. */
export type AttemptRunner = (ctx: RunContext, model: string) => Promise<RunOutcome>;

export interface TaskWorkerOptions {
  id: string;
  /** Where Redis is, for the BullMQ connections (one per BullMQ worker). */
  redisTarget: RedisTarget;
  store: TaskStore;
  log: Logger;
  metrics: TasklineMetrics;
  /** The queues this worker takes jobs from, each with its own slots. */
  queues: QueueSlots[];
  /** BullMQ workers per queue sharing its slots, so a burst of jobs is taken in parallel. Default 1. */
  fetchers?: number;
  run: AttemptRunner;
  /** Whether a claim on `model` goes straight to `running` (else `loading`, say while a model loads). */
  startsRunning(model: string): boolean;
  /**
   * Whether an attempt of `task` (a first attempt, read before its claim, on a model that starts
   * running at once) may run before its claim, which then carries its first output: see
   * `Claimer`. Default: never.
   */
  startsBeforeClaim?(task: TaskRecord, model: string): boolean;
  /**
   * Whether an error `run` threw is this worker's failure rather than the task's: the task then
   * gets its on_restart policy as after a crash. May stop the queue (`stopTaking`).
   */
  workerFault?(err: unknown, model: string): boolean;
  leaseMs: number;
  schedulerAddrs: string[];
  /** The control-plane credential, and what to do when a scheduler refuses this worker for good. */
  controlSecurity: ControlSecurity;
  onControlRefused: (message: string) => void;
  /** Called once a drain has finished (SIGTERM or a scheduler command). */
  onDrained?: () => void;
}

type StopReason = 'cancel' | 'lost' | 'drain';

/**
 * One job's claim (TaskWorker.claimer). An attempt claimed before it runs (`now`) is the rule;
 * one the service lets start before its claim (`early`: a first attempt on a model that runs at
 * once) is claimed by its first append, which carries its first output (claim.lua), so the way to
 * the first token holds one durable write where there were two. Until then the task shows
 * `queued` and holds no lease: a worker that dies meanwhile leaves its job to BullMQ's stalled
 * check, as between taking a job and claiming it (jobHold), and a cancel ends the queued task at
 * once (the claim is then refused and nothing of the attempt is written).
 */
interface Claimer {
  /** For the attempt's writes: its first `append` is the claim while none was made. */
  store: TaskStore;
  /** The record an early attempt runs with (what its claim will make of it), or null: claim `now`. */
  early(): Promise<TaskRecord | null>;
  /** Claims before (or, for an early attempt without output, after) the run; null when refused. */
  now(): Promise<TaskRecord | null>;
  /** Called once the claim lands. */
  onClaimed(fn: (task: TaskRecord) => void): void;
  settled(): boolean;
  /** Whether the attempt holds the task: claimed, not refused. */
  held(): boolean;
}

/**
 * @internal How a worker holds a BullMQ job it took (its BullMQ options). Leases, not BullMQ locks,
 * decide who runs a task; the lock covers the step before there is a lease: a worker that dies
 * after taking a job and before its claim. Held for one lease and renewed as BullMQ does (every
 * half of it), such a job goes back to the queue at a live worker's next stalled check (every
 * lease), within two leases of the death, for another worker to claim; at BullMQ's defaults
 * (30 s each) and dropped there, its task waited for the scheduler's index sweep, up to 90 s. A
 * job whose task moved on meanwhile (a dead worker's claimed attempt, recovered) claims nothing.
 */
export const jobHold = (leaseMs: number) => ({
  lockDuration: leaseMs,
  stalledInterval: leaseMs,
  maxStalledCount: 1,
});

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
 * One worker process's task loop: takes jobs from its queues, runs each task attempt under a
 * renewed lease, stops on cancel or lost lease, and on drain stops taking work and restarts what
 * did not finish by the deadline under its own `on_restart` policy.
 */
export class TaskWorker {
  private readonly workers: Worker[] = [];
  /** The BullMQ workers' connections, closed after them (BullMQ leaves a connection it was given open). */
  private readonly queueConnections: Redis[] = [];
  private readonly running = new Map<string, Running>();
  private readonly busy = new Map<string, number>();
  /** Queues this worker stopped taking (see stopTaking) until it restarts. */
  private readonly stopped = new Set<string>();
  private control: ControlClient | null = null;
  private draining: Promise<void> | null = null;
  private cancels: Redis | null = null;
  private reportDue = false;
  /** Leases renewed since start, reported in heartbeats (the operator console shows it); wraps at 2^32. */
  private leaseRenewals = 0;

  /** Whether a scheduler has welcomed this worker: its slots count (the worker's `/readyz`). */
  get registered(): boolean {
    return this.control?.connectedTo != null;
  }

  constructor(private readonly o: TaskWorkerOptions) {}

  slots(): ModelSlots[] {
    return this.o.queues.map(({ model, slots }) => ({
      model,
      slots,
      free: this.draining || this.stopped.has(model) ? 0 : slots - (this.busy.get(model) ?? 0),
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
    for (const { model, slots } of this.o.queues) {
      // A fetcher takes its jobs one round trip after another (16 at once took 16 in a row before
      // the last could start); its share of the slots goes to each of several instead.
      for (const concurrency of shareSlots(slots, this.o.fetchers ?? 1)) {
        const worker = new Fetcher(
          modelQueueName(model),
          (job: Job<DispatchJob>) => this.runJob(model, job),
          {
            connection: this.queueConnection() as never,
            prefix: queuePrefix(model),
            concurrency,
            ...jobHold(this.o.leaseMs),
            removeOnComplete: { count: 0 },
            removeOnFail: { count: 0 },
          },
        );
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
      await traceAttempt(job.data, model, () => this.execute(model, job.data));
    } finally {
      this.busy.set(model, (this.busy.get(model) ?? 1) - 1);
      this.reportSlots();
    }
  }

  /** Runs one attempt of a task from claim to its end; never throws. */
  private async execute(model: string, { taskId, attempt: offered, record }: DispatchJob): Promise<void> {
    const { log } = this.o;
    // A second job for a task this worker runs already is a stale hint. One whose claim is still in
    // flight may be the stale one instead (an older offer, to be refused): this job waits for it.
    for (let here = this.running.get(taskId); here; here = this.running.get(taskId)) {
      if (await here.claimed) {
        this.refused(taskId, { reason: 'running here' });
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
    const claim = this.claimer(model, taskId, offered, settle, record);
    const early = await claim.early();
    const task = early ?? (await claim.now());
    if (!task) {
      this.running.delete(taskId);
      return;
    }
    let renew: NodeJS.Timeout | undefined;
    let ran = false;
    // The lease is renewed from the claim to the end of the run (a claim made after it needs none).
    const held = (t: TaskRecord) => {
      tlog = log.child({ task: taskId, attempt: t.attempt });
      if (!ran) renew = this.renewLease(t, stop, tlog);
    };
    if (early) claim.onClaimed(held);
    else held(task);
    let outcome: { finish: RunOutcome; interrupted: boolean };
    try {
      const ctx = { task, attempt: task.attempt, signal: controller.signal, store: claim.store };
      outcome = await this.runAttempt(ctx, model, stop, () => reason, tlog);
    } finally {
      ran = true;
      clearInterval(renew);
    }
    // An attempt that ran before its claim and made no output claims now, to write its end.
    if (early && !claim.settled()) await claim.now();
    this.running.delete(taskId);
    // Its claim was refused: the task was never this attempt's to write.
    if (!claim.held()) return;
    const { finish, interrupted } = outcome;
    // Parked for its caller's input: the task is no longer this attempt's to write.
    if (finish.status === 'parked') {
      activeSpan()?.setAttribute(ATTR.outcome, 'parked');
      tlog.info('attempt_parked');
    } else
      await inSpan('task.finish', { attributes: { [ATTR.outcome]: finish.status } }, () =>
        this.commit(task, task.attempt, finish, reason, tlog, interrupted),
      );
  }

  /** A stale job starts no attempt: logged, and its span says so (it has no attempt number to carry). */
  private refused(taskId: string, fields: Record<string, unknown>, attemptSpan = activeSpan()): void {
    this.o.log.info('claim_refused', { task: taskId, ...fields });
    attemptSpan?.setAttribute(ATTR.outcome, 'refused');
  }

  /** The claim of one job's attempt: made before the attempt runs, or with its first output. */
  private claimer(
    model: string,
    taskId: string,
    offered: number,
    settle: (claimed: boolean) => void,
    /** The record the job carried (DispatchJob.record), if any: read from Redis otherwise. */
    carried?: Record<string, string>,
  ): Claimer {
    const { store, leaseMs } = this.o;
    const start = this.o.startsRunning(model);
    // Made again with the same nonce while Redis is unavailable: a claim that ran though its
    // caller saw it fail (an auto-pipeline aborted by a reset) is then recognised, not orphaned.
    const nonce = randomUUID();
    // The attempt's span, kept on the task for the next attempt and a restart to link to; the
    // claim's is its child, also when the claim comes with the first output, from within the run.
    const attemptSpan = activeSpan();
    const traceparent = traceparentOf(attemptSpan);
    const underAttempt = { parent: traceparent ? contextOf(traceparent) : undefined };
    let state: 'unsettled' | 'held' | 'refused' = 'unsettled';
    let task: TaskRecord | null = null;
    let onClaimed: ((task: TaskRecord) => void) | undefined;
    // The queue's wait ends where the attempt starts: its claim, or its run for one started early.
    const waited = (t: TaskRecord) =>
      this.o.metrics.queueWaitSeconds.observe(
        { kind: t.kind, model },
        Math.max(0, (Date.now() - t.createdAt) / 1000),
      );
    const claimWith = async (output?: FirstOutput): Promise<TaskRecord> => {
      try {
        const claimedTask = await inSpan('task.claim', underAttempt, () =>
          whenRedisAnswers(leaseMs, () =>
            store.claim(taskId, this.o.id, leaseMs, { start, offered, nonce, traceparent, output }),
          ),
        );
        state = 'held';
        settle(true);
        attemptSpan?.setAttribute(ATTR.attempt, claimedTask.attempt);
        if (task) Object.assign(task, claimedTask);
        else waited(claimedTask);
        onClaimed?.(claimedTask);
        return claimedTask;
      } catch (err) {
        state = 'refused';
        settle(false);
        // Already taken, cancelled or gone, or queued again since its offer: the job was a stale hint.
        this.refused(taskId, { error: err }, attemptSpan);
        throw err;
      }
    };
    // The first append of an attempt that runs before its claim is the claim; every other method
    // is the store's own (the object inherits them).
    const claiming: TaskStore = Object.create(store);
    claiming.append = (id, attempt, tokens, events, appendNonce) =>
      state === 'unsettled'
        ? claimWith({ tokens, events }).then((t) => t.seq)
        : store.append(id, attempt, tokens, events, appendNonce);
    return {
      store: claiming,
      settled: () => state !== 'unsettled',
      held: () => state === 'held',
      onClaimed: (fn) => (onClaimed = fn),
      early: async () => {
        if (!start || offered !== 0 || !this.o.startsBeforeClaim) return null;
        const read = carriedRecord(carried, taskId) ?? (await store.get(taskId).catch(() => null));
        if (!read || read.status !== 'queued' || read.attempt !== 0 || !this.o.startsBeforeClaim(read, model))
          return null;
        // What the claim will make of it (claim.lua); the claim's own record replaces it.
        task = { ...read, status: 'running', shownStatus: 'running', attempt: 1, leaseOwner: this.o.id };
        waited(task);
        return task;
      },
      now: () => claimWith().catch(() => null),
    };
  }

  /** Renews the attempt's lease every third of it; a cancel or a lost lease seen there stops it. */
  private renewLease(task: TaskRecord, stop: (r: StopReason) => void, tlog: Logger): NodeJS.Timeout {
    const { store, leaseMs } = this.o;
    return setInterval(
      () => {
        store.renew(task.id, task.attempt, leaseMs).then(
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
  }

  /**
   * Runs the attempt (`run`) and turns what it threw into the task's failure, or into an
   * interruption (`interrupted`: the task gets its on_restart policy) when the fault is the
   * worker's (a model thread that died, a model that would not load: see `workerFault`) or Redis
   * could not take a write (an outage, a reset, BUSY/LOADING/OOM: docs/redis-faults.md).
   */
  private async runAttempt(
    ctx: RunContext,
    model: string,
    stop: (r: StopReason) => void,
    stopped: () => StopReason | null,
    tlog: Logger,
  ): Promise<{ finish: RunOutcome; interrupted: boolean }> {
    try {
      const finish = await inSpan('task.run', { attributes: { [ATTR.attempt]: ctx.attempt } }, () =>
        this.o.run(ctx, model),
      );
      return { finish, interrupted: false };
    } catch (err) {
      const workerFault = this.o.workerFault?.(err, model) ?? false;
      const redisDown = isRedisUnavailable(err);
      if (err instanceof TasklineError && (err.code === 'stale_attempt' || err.code === 'task_terminal'))
        stop('lost');
      else if (err instanceof TasklineError && err.code === 'illegal_transition') stop('cancel');
      // A request the model cannot run is the caller's to fix: a warning, not an error.
      const callers = err instanceof TasklineError && isCallersFault(err.code);
      if (redisDown) tlog.warn('attempt_interrupted', { error: err });
      else if (!stopped()) tlog[callers ? 'warn' : 'error']('attempt_failed', { error: err });
      // A request the model cannot run keeps its own code (say invalid_request); the rest is ours.
      const error =
        err instanceof TasklineError
          ? problem(err.code, err.message, HTTP_STATUS[err.code])
          : problem('internal_error', err instanceof Error ? err.message : String(err));
      return { finish: { status: 'failed', error }, interrupted: workerFault || redisDown };
    }
  }

  /**
   * Stops taking `model`'s jobs (paused fetchers, no free slots reported) until the process
   * restarts, leaving them to the workers that can run them: say a model that does not load here.
   * `event` names the log line that tells the operator why.
   */
  stopTaking(model: string, event: string, err: unknown): void {
    if (this.stopped.has(model)) return;
    this.stopped.add(model);
    this.o.log.error(event, { model, error: err });
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
