// TaskStore: every read and write of a task, each through its Lua script.
import type { Redis } from 'ioredis';
import {
  StoreCore,
  flattenEvents,
  tokenList,
  type SweepFailed,
  type SweptTask,
  type TaskStoreOptions,
  type TransitionOptions,
} from './core.js';
import { notFound, TasklineError, type Problem } from './errors.js';
import { newId } from './ids.js';
import { claimTask, type ClaimOptions } from './claim.js';
import { readCheckpoint, writeCheckpoint } from './checkpoint.js';
import * as callbacks from './callbacks.js';
import { persist } from './create.js';
import { deleteEnded } from './deletion.js';
import { sweepHeldCalls } from './held.js';
import * as idempotency from './idempotency.js';
import * as inputs from './inputs.js';
import { taskKeys, WORKER_CANCEL_PREFIX } from './keys.js';
import { countEnded, operatorIndexClock, sweepOperatorIndex } from './operator-index.js';
import {
  check,
  parseEntry,
  type NewTask,
  type Offer,
  type StoredEvent,
  type TaskRecord,
  type TraceContexts,
} from './records.js';
import * as recovery from './recovery.js';
import { emptyResponse, finalEvent, statusEvent, type EventInput } from './response.js';
import type { Recovered, RestartReason } from './restart.js';
import { CANCEL_OUTCOME, isLeased, shownAfterRestart, TASK_STATUSES, type TaskStatus } from './states.js';

export {
  storeOptionsFromEnv,
  type SweepFailed,
  type SweptTask,
  type TaskStoreOptions,
  type HandOff,
} from './core.js';

export type CancelOutcome = 'cancelled' | 'cancelling' | 'noop';

/** An operator's action, recorded in the events it writes. */
export interface OperatorAction {
  action: 'cancel' | 'requeue';
  operator: string;
  at: number;
}

/**
 * How an attempt ended. `events` are its last output events, written in the same step as the end
 * and just before the final event: the end of a generation costs one write, not two.
 */
export type Finish = (
  | { status: 'succeeded'; result: unknown }
  | { status: 'failed'; error: Problem; result?: unknown }
  | { status: 'cancelled'; result?: unknown }
) & { events?: EventInput[] };

/**
 * Task records and their event logs in Redis. Every state change is one Lua script: atomic, and
 * the first commit wins; the script appends the change's event in the same step, so a task's
 * state and its log never disagree. This file holds the task lifecycle; idempotency.ts,
 * recovery.ts and inputs.ts the rest, over the shared parts in core.ts.
 */
export class TaskStore {
  readonly redis: Redis;
  readonly options: TaskStoreOptions;
  private readonly core: StoreCore;

  constructor(redis: Redis, options: TaskStoreOptions) {
    this.core = new StoreCore(redis, options);
    this.redis = redis;
    this.options = options;
  }

  private get scripts() {
    return this.core.scripts;
  }

  private now(): number {
    return this.core.now();
  }

  /**
   * Persists a task in `queued` with its `response.created` event, then queues it for dispatch.
   * The create journal (`intake`) is written first, so a crash after the record is written but
   * before it is queued leaves a trace the reconciler repairs. With replicas, it returns once
   * they have the task too. `alongside`: the caller's own writes that go to disk with the record
   * (a create's place under its tenant's cap), sent in the same round trip (see persist).
   */
  async create(input: NewTask, alongside?: () => unknown): Promise<TaskRecord> {
    const task = await persist(this.core, input, alongside);
    // The idempotency record names the task: it must survive a failover as the task does, or a
    // retry after one would create a second task (on a cluster it is on its tenant's node).
    await this.core.replicated(
      task.id,
      ...(input.idempotencyKey ? [idempotency.recordKeyOf(input.tenant, input.idempotencyKey)] : []),
    );
    return task;
  }

  /** Offers a queued task to the scheduler: see StoreCore.enqueue. */
  enqueue(task: Offer, keepJournal = false, placed?: number): Promise<boolean> {
    return this.core.enqueue(task, keepJournal, placed);
  }

  /** The task, or null when it never existed, expired, or belongs to another tenant. */
  get(id: string, tenant?: string): Promise<TaskRecord | null> {
    return this.core.get(id, tenant);
  }

  /**
   * LMSP 7.3: queued ends at once, running work is asked to stop, repeats are no-ops. An
   * operator's cancel (the console; `tenant` null) is recorded in the events it writes.
   */
  async cancel(
    id: string,
    tenant: string | null,
    operator?: string,
  ): Promise<{ outcome: CancelOutcome; task: TaskRecord }> {
    const task = await this.core.require(id, tenant ?? undefined);
    const keys = taskKeys(id);
    const result = task.kind === 'response' ? emptyResponse(task, 'cancelled') : null;
    const action = operator ? { operator_action: { action: 'cancel', operator, at: this.now() } } : {};
    const cancelled = finalEvent('cancelled', result, task.kind);
    Object.assign(cancelled.data, action);
    const cancelling = statusEvent('cancelling', action);
    const outcomes = TASK_STATUSES.map((s) => `${s}=${CANCEL_OUTCOME[s]}`).join(',');
    const reply = await this.scripts.cancel(
      keys.task,
      keys.events,
      keys.channel,
      keys.inputs,
      keys.tokens,
      this.now(),
      outcomes,
      this.options.taskRetentionMs,
      this.options.eventRetentionMs,
      JSON.stringify(result),
      cancelled.type,
      JSON.stringify(cancelled.data),
      cancelling.type,
      JSON.stringify(cancelling.data),
      WORKER_CANCEL_PREFIX,
    );
    const [outcome] = reply as [string];
    if (outcome === 'missing') throw notFound();
    if (outcome === 'corrupt') check(id, reply);
    if (outcome === 'not_cancelable') {
      throw new TasklineError('task_not_cancelable', `task ${id} already ${reply[1]}`, { status: reply[1] });
    }
    await this.core.replicated(id);
    if (outcome === 'cancelled' || outcome === 'cancelling')
      this.core.observe(task.kind, outcome, task.createdAt);
    if (outcome === 'cancelled') {
      // Cancelled before any worker claimed it: off the queue, and out of the running cap if dispatched.
      await this.core.sched.dropCancelled(task);
      await countEnded(this.redis, this.now(), 1);
    }
    return { outcome: outcome as CancelOutcome, task: await this.core.require(id, tenant ?? undefined) };
  }

  /** Deletes an ended task of `tenant` and its events at once; see deletion.ts. */
  delete(id: string, tenant: string): Promise<void> {
    return deleteEnded(this.core, id, tenant);
  }

  /** A worker takes a queued task under a new attempt and a lease: see claimTask. */
  claim(id: string, workerId: string, leaseMs: number, opts: ClaimOptions = {}): Promise<TaskRecord> {
    return claimTask(this.core, id, workerId, leaseMs, opts);
  }

  /** Extends the lease of `attempt`; returns the status so the worker learns of a cancel or a loss. */
  async renew(id: string, attempt: number, leaseMs: number): Promise<TaskStatus> {
    const reply = await this.scripts.renew(taskKeys(id).task, attempt, leaseMs);
    check(id, reply);
    // Indexed by the deadline the script stamped with Redis's clock, which the sweep reads by.
    await this.core.sched.leaseUntil(id, Number(reply[2]));
    return reply[1] as TaskStatus;
  }

  /**
   * Moves a claimed task on to `running` (the model is loaded). A new attempt of a task clients
   * already see `running` (`shown`) writes no event: nothing changes for them.
   */
  async start(id: string, attempt: number, shown?: TaskStatus): Promise<number> {
    return this.transition(id, 'running', {
      attempt,
      events: shown === 'running' ? [] : [statusEvent('running')],
    });
  }

  /**
   * Appends output events of a running attempt with the tokens they carry (the resume snapshot).
   * `nonce` names the append: made again with the same one (after a failure of unknown outcome),
   * it is stored once.
   */
  async append(
    id: string,
    attempt: number,
    tokens: readonly number[],
    events: EventInput[],
    nonce = newId('step'),
  ): Promise<number> {
    const keys = taskKeys(id);
    const reply = await this.scripts.append(
      keys.task,
      keys.events,
      keys.channel,
      keys.tokens,
      this.now(),
      attempt,
      // A re-sent append (its reply lost) is recognised by it, never applied twice (append.lua).
      nonce,
      tokenList(tokens),
      ...flattenEvents(events),
    );
    check(id, reply);
    return Number(reply[1]);
  }

  /**
   * Ends an attempt: succeeded, failed, or cancelled (only from `cancelling` unless it was never
   * claimed). A caller holding the task record passes its kind and tenant, which saves reading them.
   */
  async finish(
    id: string,
    attempt: number,
    finish: Finish,
    known?: Pick<TaskRecord, 'kind' | 'tenant' | 'parent'>,
  ): Promise<number> {
    const task = { id, ...(known ?? (await this.core.require(id))) };
    const result = finish.result ?? null;
    const error = finish.status === 'failed' ? finish.error : null;
    const fields: Record<string, string> = { result: JSON.stringify(result) };
    if (error) fields.error = JSON.stringify(error);
    const seq = await this.transition(id, finish.status, {
      attempt,
      fields,
      events: [...(finish.events ?? []), finalEvent(finish.status, result, task.kind, error)],
    });
    await this.core.released(task, { failure: error?.code });
    return seq;
  }

  /** Records a progress message (MCP `statusMessage`) and counts, fenced by attempt. */
  async progress(
    id: string,
    attempt: number,
    message: string,
    counts: { progress?: number; total?: number } = {},
  ): Promise<number> {
    const task = await this.core.require(id);
    return this.transition(id, task.status, {
      attempt,
      from: [task.status],
      fields: { status_message: message },
      // The counts ride on the status event, where MCP readers turn them into progress notifications.
      events: [statusEvent(task.shownStatus, { status_message: message, ...counts })],
    });
  }

  /** Stores a tool attempt's checkpoint (JSON), fenced by attempt (see checkpoint.ts). */
  checkpoint(id: string, attempt: number, state: string): Promise<void> {
    return writeCheckpoint(this.core, id, attempt, state);
  }

  /** The task's last checkpoint (JSON text), or null. */
  lastCheckpoint(id: string): Promise<string | null> {
    return readCheckpoint(this.core, id);
  }

  /** Asks the caller questions, parking the task while some are open (see inputs.ts). */
  requestInput(
    id: string,
    attempt: number,
    requests: Record<string, unknown>,
    timeoutMs?: number,
  ): Promise<{ waiting: boolean; parked: boolean; answers: Record<string, unknown> }> {
    return inputs.requestInput(this.core, id, attempt, requests, timeoutMs);
  }

  /**
   * The caller's answers; the last one of the current ask resumes a parked task (see inputs.ts).
   * Callback keys are not the caller's to answer: dropped (deliverCallback answers them).
   */
  async provideInput(
    id: string,
    tenant: string,
    answers: Record<string, unknown>,
  ): Promise<{ accepted: number; status: TaskStatus }> {
    const own = Object.fromEntries(Object.entries(answers).filter(([k]) => !inputs.isCallbackKey(k)));
    const result = await inputs.provideInput(this.core, id, tenant, own);
    await this.core.replicated(id);
    return result;
  }

  /** Records that a tool attempt expects callback `key`; true when it arrived already (callbacks.ts). */
  expectCallback(id: string, attempt: number, key: string, request: unknown): Promise<boolean> {
    return callbacks.expectCallback(this.core, id, attempt, key, request);
  }

  /** A callback's body, delivered once to the task its token names (callbacks.ts). */
  async deliverCallback(claims: callbacks.CallbackClaims, body: unknown): Promise<callbacks.CallbackOutcome> {
    const outcome = await callbacks.deliverCallback(this.core, claims, body);
    if (outcome.taken) await this.core.replicated(claims.t);
    return outcome;
  }

  /** Questions of the current ask still open. */
  openInputRequests(id: string): Promise<Record<string, unknown>> {
    return inputs.openInputRequests(this.redis, id);
  }

  answers(id: string): Promise<Record<string, unknown>> {
    return inputs.answers(this.redis, id);
  }

  /**
   * Fails parked tasks past their input deadline with `input_timeout`; returns their ids. A task
   * it cannot fail is skipped and told to `failed` (see sweepEach), as in every sweep below.
   */
  sweepInputDeadlines(limit?: number, failed?: SweepFailed): Promise<string[]> {
    return inputs.sweepInputDeadlines(this.core, limit, failed);
  }

  /** How many tasks wait for their caller's input, holding no worker slot. */
  parkedCount(): Promise<number> {
    return this.core.sched.parkedCount();
  }

  /** Token ids the task's output events carried so far: where `resume` continues from. */
  snapshot(id: string): Promise<number[]> {
    return this.core.snapshot(id);
  }

  /**
   * Applies LMSP 7.5 to a task whose lease lapsed by Redis's clock (its worker is gone), or would
   * have `aheadMs` from now (tests). Returns the new status, or null when there was nothing to do
   * (a live lease, a finished task, a lost race).
   */
  async recover(id: string, aheadMs = 0): Promise<TaskStatus | null> {
    return (await recovery.recoverTask(this.core, id, aheadMs))?.status ?? null;
  }

  /**
   * Applies LMSP 7.5 to an attempt its worker cannot finish, exactly as if the worker had crashed,
   * fenced by that attempt: at a drain deadline (`worker_draining`, the default) or after its
   * model died under it (`worker_lost`). A task cancelled meanwhile ends `cancelled`.
   */
  restart(id: string, attempt: number, reason: RestartReason = 'worker_draining'): Promise<Recovered | null> {
    return recovery.restartAttempt(this.core, id, attempt, reason);
  }

  /** The recovery sweep over lapsed leases (see recovery.ts). Safe on any number of replicas. */
  sweepLeases(limit?: number, failed?: SweepFailed): Promise<Recovered[]> {
    return recovery.sweepLeases(this.core, limit, failed);
  }

  /** Cancels the tasks of held calls whose replica stopped renewing their lease (see held.ts). */
  sweepHeldCalls(limit?: number, failed?: SweepFailed): Promise<string[]> {
    return sweepHeldCalls(this.core, (id) => this.cancel(id, null), limit, failed);
  }

  /** Queues journalled creates older than `olderThanMs` that never reached the ready index. */
  reconcileIntake(olderThanMs: number, limit?: number, failed?: SweepFailed): Promise<string[]> {
    return recovery.reconcileIntake(this.core, olderThanMs, limit, failed);
  }

  /** Offers again the tasks of dispatches that died before their job was queued (see recovery.ts). */
  reconcileDispatches(
    olderThanMs: number,
    hasJob: (task: TaskRecord) => Promise<boolean>,
    limit?: number,
    failed?: SweepFailed,
  ): Promise<string[]> {
    return recovery.reconcileDispatches(this.core, olderThanMs, hasJob, limit, failed);
  }

  /**
   * Bounds and expires the operator and tool-task indexes (of each tenant that created a task
   * since `since` ms of Redis's clock, and of those with unfinished tool tasks) and drops
   * throughput counts over an hour old (see sweepOperatorIndex); returns how many tenants it visited.
   */
  sweepOperatorIndex(since: number): Promise<number> {
    return sweepOperatorIndex(this.redis, since, this.now(), this.indexOptions);
  }

  /** Redis's clock (ms) that `sweepOperatorIndex`'s `since` is read by. */
  operatorIndexClock(): Promise<number> {
    return operatorIndexClock(this.redis);
  }

  /** Repairs the tenants' running sets (see recovery.ts); returns how many entries it dropped. */
  sweepActive(
    olderThanMs: number,
    hasJob: (task: SweptTask) => Promise<boolean>,
    failed?: SweepFailed,
  ): Promise<number> {
    return recovery.sweepActive(this.core, olderThanMs, hasJob, failed);
  }

  /**
   * Events after `after`, oldest first. `expired` is true when some of them are no longer kept:
   * the history was trimmed or dropped while the task (or its expiry) still says it existed.
   */
  async events(
    id: string,
    after: number,
    count?: number,
  ): Promise<{ events: StoredEvent[]; expired: boolean }> {
    const events = await this.eventsAfter(id, after, count);
    const first = events[0]?.seq;
    const expired = first === undefined ? await this.historyGone(id, after) : first > after + 1;
    return { events, expired };
  }

  /** Events after `after` that are still kept, oldest first (one read; see `events` for the gaps). */
  async eventsAfter(id: string, after: number, count?: number): Promise<StoredEvent[]> {
    // An entry is named by its last event: the first one read may hold some at or before `after`.
    const args: (string | number)[] = [taskKeys(id).events, `${after + 1}-0`, '+'];
    if (count) args.push('COUNT', count);
    const raw = (await this.redis.xrange(...(args as [string, string, string]))) as [string, string[]][];
    const events = raw.flatMap(parseEntry).filter((e) => e.seq > after);
    return count ? events.slice(0, count) : events;
  }

  /**
   * The stored trace contexts of each task (null where none, or the task is gone), in one round
   * trip: its create's (`traceparent`), which the scheduler's dispatch spans join, and its last
   * attempt's, which the next attempt and a restart link to (only read when tracing is on).
   */
  async traceContexts(ids: string[]): Promise<TraceContexts[]> {
    const read = (id: string) => this.redis.hmget(taskKeys(id).task, 'traceparent', 'attempt_traceparent');
    const replies = await Promise.all(ids.map(read));
    return replies.map(([task, attempt]) => ({ task: task ?? null, attempt: attempt ?? null }));
  }

  private async historyGone(id: string, after: number): Promise<boolean> {
    const seq = await this.redis.hget(taskKeys(id).task, 'seq');
    return seq !== null && Number(seq) > after && (await this.redis.exists(taskKeys(id).events)) === 0;
  }

  /** The task an earlier create with this key and body made, without reserving anything. */
  findIdempotent(tenant: string, key: string, fingerprint: string): Promise<TaskRecord | null> {
    return idempotency.findIdempotent(this.core, tenant, key, fingerprint);
  }

  /** Reserves an Idempotency-Key for a create (see idempotency.ts). */
  beginIdempotent(
    tenant: string,
    key: string,
    fingerprint: string,
  ): Promise<{ taskId: string; replay: TaskRecord | null; recordKey: string }> {
    return idempotency.beginIdempotent(this.core, tenant, key, fingerprint);
  }

  finishIdempotent(recordKey: string, taskId: string): Promise<void> {
    return idempotency.finishIdempotent(this.core, recordKey, taskId);
  }

  /** Creates a task once per (tenant, Idempotency-Key); same key and body give the same task. */
  createIdempotent(
    input: NewTask,
    key: string,
    fingerprint: string,
    alongside?: () => unknown,
  ): Promise<{ task: TaskRecord; replayed: boolean }> {
    return idempotency.createIdempotent(this.core, (t) => this.create(t, alongside), input, key, fingerprint);
  }

  /**
   * Queues a stuck task again for an operator (see OperatorView.requeue), from the state it was
   * read in: a leased one only once its lease lapsed by Redis's clock, fenced by its attempt; a
   * queued one belongs to no attempt (a claim that lands first moves it on, and this is refused).
   * What the client saw never steps back (LMSP 7.2), as after a restart. Returns the event number.
   */
  requeue(task: TaskRecord, action: OperatorAction): Promise<number> {
    const shown = task.shownStatus === 'queued' ? 'queued' : shownAfterRestart(task.shownStatus);
    return this.transition(task.id, 'queued', {
      from: [task.status],
      ...(isLeased(task.status) ? { attempt: task.attempt, leaseLapsedAhead: 0 } : {}),
      fields: { status_message: `requeued by operator`, shown },
      events: [statusEvent(shown, { reason: 'operator_requeue', operator_action: action })],
    });
  }

  /** One state change (see StoreCore.transition): only this store's named operations make one. */
  private transition(id: string, to: TaskStatus, opts: TransitionOptions): Promise<number> {
    return this.core.transition(id, to, opts);
  }

  private get indexOptions() {
    return { max: this.options.operatorIndexMax ?? 10_000, retentionMs: this.options.taskRetentionMs };
  }
}
