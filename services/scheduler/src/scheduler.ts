// One scheduler replica: leadership, dispatch and the sweeps, each a loop.
import { ATTR, lapsedAttemptLink, recordSpan, tracingOn } from '@taskline/tracing';
import type { Redis } from 'ioredis';
import {
  startControlServer,
  dispatchJobId,
  JobQueues,
  normaliseControlAddress,
  type ControlSecurity,
  type ControlServer,
  type DispatchJob,
} from '@taskline/control';
import {
  connectQueueRedis,
  defineDispatch,
  handedOver,
  indexTenant,
  Leadership,
  lend,
  listenForOffers,
  pickFair,
  readyBacklog,
  readyModelCount,
  readyModels,
  writeWorkerSnapshot,
  type FairShareOptions,
  type Pick,
  type Recovered,
  type RedisTarget,
  type SweepFailed,
  type SweptTask,
  type TaskStore,
  type TraceContexts,
} from '@taskline/engine';
import type { Logger } from '@taskline/log';
import type { TasklineMetrics } from '@taskline/metrics';

export interface SchedulerOptions {
  id: string;
  redis: Redis;
  /** Where Redis is, for the BullMQ connections (one per queue). */
  redisTarget: RedisTarget;
  store: TaskStore;
  log: Logger;
  metrics: TasklineMetrics;
  controlHost: string;
  controlPort: number;
  /** Who may connect to the control plane (`controlSecurityFromEnv`). */
  controlSecurity: ControlSecurity;
  /** Address workers are redirected to; defaults to host:port once bound. */
  advertise: string;
  leaderLeaseMs: number;
  heartbeatMs: number;
  workerTimeoutMs: number;
  dispatchIntervalMs: number;
  recoveryIntervalMs: number;
  reconcileAfterMs: number;
  indexSweepMs: number;
  fairShare: FairShareOptions;
}

/**
 * One scheduler replica. Every replica competes for leadership; the leader alone dispatches
 * (fenced by its token inside the dispatch script) and accepts workers on the control plane.
 * Recovery, reconciliation and index sweeps are idempotent, so the leader runs them too.
 */
export class Scheduler {
  private control!: ControlServer;
  private leadership: Leadership | null = null;
  private exportedLeader = false;
  /** Models whose queue gauges this replica has set, to clear when it stands by. */
  private readonly gaugedModels = new Set<string>();
  private readonly jobs: JobQueues;
  private readonly timers: NodeJS.Timeout[] = [];
  private stopped = false;
  private busy = new Set<string>();
  private readonly loops = new Map<string, () => Promise<unknown>>();
  private readonly rerun = new Set<string>();
  private wakeup: Redis | null = null;
  /** Wake-ups heard so far (every enqueue publishes one). */
  private wakes = 0;
  /**
   * The last dispatch round left no ready task anywhere and no task was offered since: freed
   * capacity then has nothing to take, and needs no round. The interval still runs rounds.
   */
  private drained = false;
  /** Models named by offers since the last round began: all that a round for offers alone visits. */
  private readonly offered = new Set<string>();
  /**
   * The next round reads the whole ready index (and every served model's BullMQ count) instead of
   * visiting only the models offers named: after freed capacity, on the interval, on taking the lead.
   */
  private fullRound = true;
  /**
   * Per model, at least as many BullMQ jobs as wait for a worker: the count last read plus every job
   * added since (workers only ever take jobs away). While free slots exceed it, no count is read.
   */
  private readonly waitingBound = new Map<string, number>();
  /**
   * Per model, the slots of the last loan to the creates (lend.lua): a round that picks the model
   * takes it back first; a model with no free slot left has it withdrawn.
   */
  private readonly lent = new Map<string, number>();
  /** When this replica's last operator index sweep began (see sweepOperatorIndex). */
  private indexSweptAt = -Infinity;

  constructor(private readonly o: SchedulerOptions) {
    this.jobs = new JobQueues(() => connectQueueRedis(o.redisTarget, `${o.id}-queue`));
  }

  get controlPort(): number {
    return this.control.port;
  }

  get isLeader(): boolean {
    return this.leadership?.isLeader() ?? false;
  }

  async start(): Promise<void> {
    const o = this.o;
    this.control = await startControlServer({
      address: `${o.controlHost}:${o.controlPort}`,
      schedulerId: o.id,
      security: o.controlSecurity,
      heartbeatMs: o.heartbeatMs,
      workerTimeoutMs: o.workerTimeoutMs,
      leadership: {
        isLeader: () => this.isLeader,
        leaderAddr: () => this.leadership?.leaderAddr() ?? Promise.resolve(null),
      },
      // Capacity freed by a finishing task is used at once, not at the next interval tick: by a
      // round, or with nothing ready, lent to the creates.
      onCapacity: () => {
        if (!this.drained) this.fullRound = true;
        void this.run('dispatch', true);
      },
      // A full round lends anew from the slots left, withdrawing the loans of slots that are gone.
      onCapacityLost: () => {
        this.fullRound = true;
        void this.run('dispatch', true);
      },
      onEvent: (event, fields) => o.log.info(event, fields),
    });
    // Stored for workers of any version, so an IPv6 literal is bracketed here ($(POD_IP):port has none).
    const address = normaliseControlAddress(o.advertise || `${o.controlHost}:${this.control.port}`);
    this.leadership = new Leadership(o.redis, address, o.leaderLeaseMs);
    defineDispatch(o.redis);
    this.every(Math.max(50, Math.floor(o.leaderLeaseMs / 3)), 'leadership', () => this.lead());
    this.every(
      o.dispatchIntervalMs,
      'dispatch',
      () => this.dispatch(),
      () => (this.fullRound = true),
    );
    this.every(o.recoveryIntervalMs, 'recovery', () => this.recover());
    this.every(o.recoveryIntervalMs, 'reconcile', () => this.reconcile());
    this.every(o.indexSweepMs, 'running-sets', () => this.sweepRunningSets());
    // A loop of its own: a failing index sweep must not stop the running sets' repair.
    this.every(o.indexSweepMs, 'operator-index', () => this.sweepOperatorIndex());
    this.o.metrics.schedulerLeader.set(0);
    this.every(1000, 'metrics', () => this.exportDepth());
    // Workers report to the leader alone; the operator console reads this copy of what it knows.
    this.every(1000, 'workers', () =>
      writeWorkerSnapshot(
        o.redis,
        { scheduler: o.id, at: Date.now(), workers: this.control.workers() },
        Math.max(3000, o.leaderLeaseMs),
      ),
    );
    await this.listen();
    // Through the loop, which logs a failed tick: a Redis outage at start is one more tick to retry.
    await this.run('leadership', false);
    o.log.info('scheduler_started', { control: address, leader: this.isLeader });
  }

  /**
   * Runs `fn` every `ms`, never overlapping itself, and only while this replica leads (but
   * leadership itself); `onTick` runs on every tick, even one that finds `fn` still running.
   */
  private every(ms: number, name: string, fn: () => Promise<unknown>, onTick?: () => void): void {
    this.loops.set(name, fn);
    this.timers.push(
      setInterval(() => {
        onTick?.();
        void this.run(name, false);
      }, ms),
    );
  }

  /** One run of a loop; `again` asks for one more run right after a run in progress (a wake-up). */
  private async run(name: string, again: boolean): Promise<void> {
    const fn = this.loops.get(name)!;
    if (this.stopped || (name !== 'leadership' && !this.isLeader)) return;
    if (this.busy.has(name)) {
      if (again) this.rerun.add(name);
      return;
    }
    this.busy.add(name);
    try {
      await fn();
    } catch (err) {
      this.o.log.warn('loop_failed', { loop: name, error: err });
    } finally {
      this.busy.delete(name);
    }
    if (this.rerun.delete(name)) await this.run(name, false);
  }

  /**
   * Dispatch is event-driven: every enqueue announces its model (`listenForOffers`) and the leader runs a
   * round at once, as it does when a worker reports freed slots; the interval stays as the safety net
   * (a lost message).
   */
  private async listen(): Promise<void> {
    this.wakeup = await listenForOffers(this.o.redis, (model) => {
      this.wakes++;
      this.drained = false;
      this.offered.add(model);
      void this.run('dispatch', true);
    });
  }

  private async lead(): Promise<void> {
    const was = this.isLeader;
    const now = await this.leadership!.tick();
    this.exportLeadership(now);
    if (now === was) return;
    this.o.log.info(now ? 'leader_elected' : 'leader_lost', { scheduler: this.o.id });
    // Another leader may have queued jobs meanwhile: counts are read afresh, and its loans are void.
    this.waitingBound.clear();
    this.lent.clear();
    this.indexSweptAt = -Infinity;
    this.fullRound = true;
  }

  /**
   * The leader gauge, and no queue gauges on a standby: autoscaling reads the leader's only, and a
   * replica that lost leadership (even one that learns it late, after a pause past its lease)
   * would otherwise keep exporting the last queue it saw.
   */
  private exportLeadership(leading: boolean): void {
    if (leading === this.exportedLeader) return;
    this.exportedLeader = leading;
    this.o.metrics.schedulerLeader.set(leading ? 1 : 0);
    if (!leading)
      for (const model of this.gaugedModels) {
        this.o.metrics.setQueueDepth(model, new Map());
        this.o.metrics.setQueueWait(model, new Map());
      }
  }

  /**
   * Free slots that no queued job has claimed yet, of `models` (null: every model workers serve):
   * what this round may dispatch. A model's BullMQ count is read when `recount` asks, or when its
   * bound leaves no room.
   */
  private async available(models: string[] | null, recount: boolean): Promise<Map<string, number>> {
    const free = this.control.capacity();
    const budgets = new Map<string, number>();
    await Promise.all(
      (models ?? [...free.keys()]).map(async (model) => {
        const slots = free.get(model) ?? 0;
        if (slots <= 0) return;
        let bound = this.waitingBound.get(model);
        if (recount || bound === undefined || bound >= slots) {
          bound = await this.jobs.queue(model).getJobCountByTypes('waiting', 'prioritized', 'delayed');
          this.waitingBound.set(model, bound);
        }
        budgets.set(model, Math.max(0, slots - bound));
      }),
    );
    return budgets;
  }

  /**
   * One dispatch round: for each model with free slots and ready tasks, picks fairly up to them and
   * queues the picks, then lends the free slots of models with nothing ready to the creates. A
   * round for offers alone visits the models they named with the bounds it holds, so a task
   * offered to an idle system goes from the wake-up straight to `dispatch.lua`. Freed capacity
   * with nothing ready needs no round: its slots are lent.
   */
  async dispatch(): Promise<number> {
    if (this.drained && !this.fullRound && this.offered.size === 0) {
      await this.lendFree(this.withdrawn(await this.available(null, false)));
      return 0;
    }
    const wakes = this.wakes;
    const full = this.fullRound;
    this.fullRound = false;
    const named = [...this.offered];
    this.offered.clear();
    // Models with ready tasks, read alongside the free slots: the others need no dispatch script.
    // A task offered after this read wakes this replica, which runs the round again.
    const [free, waiting] = await Promise.all([
      this.available(full ? null : named, full),
      full ? readyModels(this.o.redis) : named,
    ]);
    const ready = new Set(waiting);
    // A model with tasks to pick takes its loan back first: slots taken from it are jobs queued.
    const lentOut = [...free].filter(([model]) => ready.has(model) && (this.lent.get(model) ?? 0) > 0);
    const taken = await this.lendFree(new Map(lentOut.map(([model]) => [model, 0])));
    const picked = new Map<string, number>();
    await Promise.all(
      [...free].map(async ([model, slots]) => {
        // Every ready model's loan was taken back above: what was taken of it is queued.
        const budget = slots - (taken.get(model) ?? 0);
        if (budget > 0 && ready.has(model)) picked.set(model, await this.dispatchModel(model, budget));
      }),
    );
    // Read after the picks: a task offered since then has woken this replica (wakes moved on).
    const left = await readyModelCount(this.o.redis);
    this.drained = left === 0 && wakes === this.wakes;
    const stillReady = new Set(left === 0 ? [] : await readyModels(this.o.redis));
    const loans = new Map(
      [...free].map(([model, slots]) => [
        model,
        stillReady.has(model) ? 0 : slots - (taken.get(model) ?? 0) - (picked.get(model) ?? 0),
      ]),
    );
    await this.lendFree(full ? this.withdrawn(loans) : loans);
    return [...picked.values()].reduce((a, b) => a + b, 0);
  }

  /**
   * `loans` of every model with free slots, and none for a model lent to before that has no free
   * slot now (its workers gone or draining): its loan is withdrawn.
   */
  private withdrawn(loans: Map<string, number>): Map<string, number> {
    for (const [model, lent] of this.lent) if (lent > 0 && !loans.has(model)) loans.set(model, 0);
    return loans;
  }

  /**
   * Lends `slots` per model to the creates (lend.lua), replacing the last loans, and returns the
   * slots taken from those per model: jobs queued since, added to the waiting bound (its next
   * count, once it reaches the free slots, sets it right).
   */
  private async lendFree(slots: Map<string, number>): Promise<Map<string, number>> {
    const taken = new Map<string, number>();
    if (slots.size === 0) return taken;
    const entries = [...slots].map(([model, n]): [string, number] => [model, Math.max(0, n)]);
    const reply = await lend(this.o.redis, this.leadership!.token, this.o.fairShare.maxRunning, entries);
    if (!reply) return taken;
    entries.forEach(([model, n], i) => {
      taken.set(model, reply[i]!);
      const bound = this.waitingBound.get(model);
      if (bound !== undefined) this.waitingBound.set(model, bound + reply[i]!);
      this.lent.set(model, n);
    });
    return taken;
  }

  private async dispatchModel(model: string, free: number): Promise<number> {
    const picks = await pickFair(this.o.redis, this.leadership!.token, model, free, this.o.fairShare);
    if (!picks?.length) return 0;
    // Every pick's writes go out together (one round trip each step, not one per pick), and the
    // queued ones leave the in-flight index in one command.
    // Traced, each pick's spans join its task's trace (its stored context: one read, picks alike).
    const traces = tracingOn() ? await this.o.store.traceContexts(picks.map((pick) => pick.id)) : [];
    const queued = await Promise.all(picks.map((pick, i) => this.queuePick(model, pick, traces[i])));
    const handed = picks.filter((_, i) => queued[i]).map((pick) => pick.id);
    await handedOver(this.o.redis, handed);
    const count = handed.length;
    if (count > 0) this.o.log.debug('dispatched', { model, count });
    return count;
  }

  /**
   * Queues a pick's BullMQ job (JobQueues.handOff). A pick without a state stays in flight for
   * the reconciler to offer again with one (see pickFair).
   */
  private async queuePick(model: string, pick: Pick, traces?: TraceContexts): Promise<boolean> {
    if (!pick.state) return false;
    await this.jobs.handOff(model, { id: pick.id, tenant: pick.tenant, ...pick.state }, traces);
    const bound = this.waitingBound.get(model);
    if (bound !== undefined) this.waitingBound.set(model, bound + 1);
    return true;
  }

  /**
   * Each restart as a span of its task's trace (its outcome and policy), linked to the attempt
   * whose lease lapsed: both contexts as the sweep read them before the restart.
   */
  private traceRestarts(recovered: Recovered[]): void {
    for (const r of recovered) {
      const attributes = { [ATTR.taskId]: r.id, [ATTR.policy]: r.policy, [ATTR.outcome]: r.status };
      recordSpan('task.restart', r.traces.task, attributes, { links: lapsedAttemptLink(r.traces.attempt) });
    }
  }

  /** How a sweep reports a task it skipped (its step failed): logged; the next round tries again. */
  private skipped(sweep: string): SweepFailed {
    return (task, error) => this.o.log.warn('sweep_skipped_task', { sweep, task, error });
  }

  private async recover(): Promise<void> {
    const timedOut = await this.o.store.sweepInputDeadlines(undefined, this.skipped('input_deadlines'));
    if (timedOut.length) this.o.log.info('input_timed_out', { tasks: timedOut });
    const recovered = await this.o.store.sweepLeases(undefined, this.skipped('leases'));
    if (tracingOn()) this.traceRestarts(recovered);
    for (const r of recovered) {
      this.o.metrics.leasesExpiredTotal.inc();
      this.o.metrics.restartPoliciesAppliedTotal.inc({ kind: r.kind, policy: r.policy });
      this.o.log.info('task_recovered', { task: r.id, status: r.status, policy: r.policy });
    }
    const abandoned = await this.o.store.sweepHeldCalls(undefined, this.skipped('held_calls'));
    if (abandoned.length) this.o.log.info('held_calls_cancelled', { tasks: abandoned });
  }

  /**
   * Repairs what crashes leave between steps: journalled creates that never reached the ready
   * index, and picks whose dispatch died between the pick and the BullMQ add.
   */
  private async reconcile(): Promise<void> {
    const after = this.o.reconcileAfterMs;
    const requeued = await this.o.store.reconcileIntake(after, undefined, this.skipped('intake'));
    if (requeued.length) this.o.log.info('intake_reconciled', { tasks: requeued });
    await this.o.store.reconcileDispatches(after, this.hasJob, undefined, this.skipped('dispatches'));
  }

  /** Whether the job of a task's queued state is in its model's queue (waiting or taken). */
  private readonly hasJob = async (task: SweptTask): Promise<boolean> =>
    Boolean(await this.jobs.queue(task.model).getJob(dispatchJobId(task)));

  /**
   * Drops index entries of tasks that ended or expired, or that wait parked for their caller's
   * input (the per-tenant running sets that cap concurrency), and re-offers queued tasks whose job
   * vanished (e.g. a failed claim) or was never queued (a dispatcher that died after its pick).
   */
  async sweepRunningSets(): Promise<number> {
    return this.o.store.sweepActive(this.o.reconcileAfterMs, this.hasJob, this.skipped('running_sets'));
  }

  /**
   * Bounds the operator index of tenants that created since the last sweep, with one interval's
   * overlap (a new leader visits them all). By Redis's clock, which scores the tenants' creates:
   * an api or scheduler host clock off by any amount misses none.
   */
  private async sweepOperatorIndex(): Promise<void> {
    const started = await this.o.store.operatorIndexClock();
    await this.o.store.sweepOperatorIndex(this.indexSweptAt - this.o.indexSweepMs);
    this.indexSweptAt = started;
  }

  /**
   * Queue depth and wait per model and tenant for autoscaling: the depth is the ready index plus
   * jobs not yet taken, the wait the age of the oldest ready task (the index is scored by creation
   * time). Runs every second whatever the backlog: a ZCARD and the oldest entry per model and tenant.
   */
  private async exportDepth(): Promise<void> {
    const depth = new Map<string, Map<string, number>>();
    const wait = new Map<string, Map<string, number>>();
    const add = (model: string, tenant: string, n: number) => {
      const m = depth.get(model) ?? new Map<string, number>();
      m.set(tenant, (m.get(tenant) ?? 0) + n);
      depth.set(model, m);
    };
    const now = Date.now();
    for (const { model, tenant, depth: total, oldestAt } of await readyBacklog(this.o.redis)) {
      // A tenant's child generations are indexed under a name of their own: shown as the tenant.
      const owner = indexTenant(tenant);
      add(model, owner, total);
      const waits = wait.get(model) ?? new Map<string, number>();
      waits.set(owner, Math.max(waits.get(owner) ?? 0, (now - oldestAt) / 1000));
      wait.set(model, waits);
    }
    for (const [model, queue] of this.jobs.opened()) {
      for (const job of await queue.getJobs(['waiting', 'prioritized'], 0, 999))
        add(model, indexTenant((job.data as DispatchJob).tenant), 1);
    }
    // Leadership may have gone while the counts were read: a standby exports no queue.
    if (!this.exportedLeader) return;
    this.o.metrics.tasksParked.set(await this.o.store.parkedCount());
    for (const model of new Set([...this.jobs.opened().map(([model]) => model), ...depth.keys()])) {
      this.gaugedModels.add(model);
      this.o.metrics.setQueueDepth(model, depth.get(model) ?? new Map());
      this.o.metrics.setQueueWait(model, wait.get(model) ?? new Map());
    }
  }

  /** Steps down and stops: a standby takes over at once instead of waiting for the lease. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    this.wakeup?.disconnect();
    await this.leadership?.release().catch(() => undefined);
    await this.control.close();
    await this.jobs.close();
  }

  /** Tells workers to drain (all of them when `workerId` is null). */
  drain(workerId: string | null, deadlineMs: number): number {
    const told = this.control.drain(workerId, deadlineMs);
    // Their slots are no longer free: a full round withdraws what was lent of them.
    this.fullRound = true;
    void this.run('dispatch', true);
    return told;
  }
}
