import type { Redis } from 'ioredis';
import { createHash } from 'node:crypto';
import { ReplicaAck } from './durability.js';
import { TasklineError } from './errors.js';
import { newId } from './ids.js';
import * as inputs from './inputs.js';
import {
  idempotencyKey,
  offeredState,
  queueTenant,
  schedulerKeys,
  taskKeys,
  WORKER_CANCEL_PREFIX,
} from './keys.js';
import {
  emptyResponse,
  finalEvent,
  statusEvent,
  type EventInput,
  type Problem,
  type ResponseObject,
} from './response.js';
import { countEnded, indexCreated } from './operator.js';
import { restartPlan, type Recovered, type RestartReason } from './restart.js';
import { loadScripts, type ScriptReply, type Scripts } from './scripts.js';
import {
  CANCEL_OUTCOME,
  isTaskStatus,
  isTerminal,
  sourcesOf,
  TASK_STATUSES,
  visibleStatus,
  type OnRestart,
  type TaskStatus,
} from './states.js';

/** `response`: an LMSP response generation. `tool`: an MCP tool call run durably by a worker. */
export type TaskKind = 'response' | 'tool';

export interface TaskRecord {
  id: string;
  tenant: string;
  kind: TaskKind;
  /** The engine's state: what scripts and workers act on. */
  status: TaskStatus;
  /**
   * The state clients see (LMSP, MCP): `status`, except that a task whose new attempt is queued
   * or loading still shows what it showed when the last attempt was interrupted.
   */
  shownStatus: TaskStatus;
  /** Attempt of the worker that holds (or last held) the task; 0 before the first claim. */
  attempt: number;
  /** Sequence number of the task's last event. */
  seq: number;
  createdAt: number;
  updatedAt: number;
  endedAt: number | null;
  /** When a terminal task and its history disappear (ms since epoch); null while it runs. */
  expiresAt: number | null;
  onRestart: OnRestart;
  model: string;
  responseId: string;
  /** The request the task runs, as the protocol layer gave it (opaque to the engine). */
  request: unknown;
  /** The outcome: an LMSP response object or an MCP tool result. */
  result: unknown;
  error: Problem | null;
  statusMessage: string | null;
  leaseOwner: string | null;
  leaseUntil: number | null;
  /**
   * No attempt holds the task: it waits for its caller's input (`input_required`), or was answered
   * and waits for a worker (`running`). See request_input.lua.
   */
  parked: boolean;
  /** When a parked task still unanswered fails with `input_timeout` (ms since epoch). */
  inputDeadline: number | null;
  /** The tool task a child generation runs for: it is dispatched under its parent's place. */
  parent: string | null;
}

export interface NewTask {
  tenant: string;
  kind: TaskKind;
  model: string;
  onRestart: OnRestart;
  request: unknown;
  /** A retry of an idempotent create reuses the id its first try chose. */
  id?: string;
  /** The tool task this generation runs for (see TaskRecord.parent). */
  parent?: string;
}

export interface StoredEvent {
  seq: number;
  type: string;
  /** The event's JSON without `sequence_number`, as written. */
  data: string;
  /** When the writer committed it (its clock, ms): set on live events, not on history reads. */
  writtenAt?: number;
}

/** A state change this store committed (for metrics: transitions by kind, end-to-end task time). */
export interface TransitionObserved {
  kind: TaskKind;
  /** The state entered. */
  state: TaskStatus;
  /** Whether `state` ends the task. */
  terminal: boolean;
  createdAt: number;
}

export interface TaskStoreOptions {
  taskRetentionMs: number;
  eventRetentionMs: number;
  idempotencyTtlS: number;
  idempotencyPendingMs: number;
  /** Newest tasks the operator index keeps per tenant (`TASKLINE_OPERATOR_INDEX_MAX`). */
  operatorIndexMax?: number;
  /** How long a task waits for its caller's input before it fails (`input_timeout`); default a day. */
  inputTimeoutMs?: number;
  now?: () => number;
  /**
   * Set where clients are answered (the api): creates, cancels and answers wait this long for
   * every connected Redis replica to have them before they are acknowledged (`WAIT`).
   */
  replicaAckTimeoutMs?: number;
  /** Told of every state change this store's process commits, after it committed. */
  onTransition?: (change: TransitionObserved) => void;
}

/** The store's options from the validated environment (`@taskline/config`), the same for every service. */
export function storeOptionsFromEnv(env: {
  TASKLINE_TASK_RETENTION_S: number;
  TASKLINE_EVENT_RETENTION_S: number;
  TASKLINE_IDEMPOTENCY_TTL_S: number;
  TASKLINE_IDEMPOTENCY_PENDING_MS: number;
  TASKLINE_OPERATOR_INDEX_MAX?: number;
  TASKLINE_INPUT_TIMEOUT_S: number;
}): TaskStoreOptions {
  return {
    operatorIndexMax: env.TASKLINE_OPERATOR_INDEX_MAX,
    inputTimeoutMs: env.TASKLINE_INPUT_TIMEOUT_S * 1000,
    taskRetentionMs: env.TASKLINE_TASK_RETENTION_S * 1000,
    eventRetentionMs: env.TASKLINE_EVENT_RETENTION_S * 1000,
    idempotencyTtlS: env.TASKLINE_IDEMPOTENCY_TTL_S,
    idempotencyPendingMs: env.TASKLINE_IDEMPOTENCY_PENDING_MS,
  };
}

export type CancelOutcome = 'cancelled' | 'cancelling' | 'noop';

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
 * state and its log never disagree.
 */
export class TaskStore {
  private readonly scripts: Scripts;
  private readonly now: () => number;
  private readonly replicaAck: ReplicaAck | null;
  private readonly inputs: inputs.InputHost;

  constructor(
    readonly redis: Redis,
    readonly options: TaskStoreOptions,
  ) {
    this.scripts = loadScripts(redis);
    this.now = options.now ?? Date.now;
    this.replicaAck = options.replicaAckTimeoutMs ? new ReplicaAck(redis, options.replicaAckTimeoutMs) : null;
    this.inputs = {
      redis,
      scripts: this.scripts,
      now: () => this.now(),
      inputTimeoutMs: options.inputTimeoutMs ?? inputs.DEFAULT_INPUT_TIMEOUT_MS,
      taskRetentionMs: options.taskRetentionMs,
      eventRetentionMs: options.eventRetentionMs,
      require: (id, tenant) => this.require(id, tenant),
      check,
      enqueue: (task, keepJournal) => this.enqueue(task, keepJournal),
      released: (task) => this.released(task),
      observe: (kind, state, createdAt) => this.observe(kind, state, createdAt),
    };
  }

  /**
   * Resolves once what this store wrote for task `id` (its record, the scheduler's index, and any
   * `also` keys) is on every connected replica of the nodes that hold it (`replication_timeout` if not).
   */
  private async replicated(id: string, ...also: string[]): Promise<void> {
    await this.replicaAck?.wait([taskKeys(id).task, schedulerKeys.intake, ...also]);
  }

  /**
   * Persists a task in `queued` with its `response.created` event, then queues it for dispatch.
   * The create journal (`intake`) is written first, so a crash after the record is written but
   * before it is queued leaves a trace the reconciler repairs. With replicas, it returns once
   * they have the task too.
   */
  async create(input: NewTask): Promise<TaskRecord> {
    const task = await this.persist(input);
    await this.replicated(task.id);
    return task;
  }

  private async persist(input: NewTask): Promise<TaskRecord> {
    const id = input.id ?? newId('task');
    const now = this.now();
    const responseId = `resp_${id.slice('task_'.length)}`;
    const keys = taskKeys(id);
    const fields: Record<string, string> = {
      id,
      tenant: input.tenant,
      kind: input.kind,
      model: input.model,
      on_restart: input.onRestart,
      response_id: responseId,
      request: JSON.stringify(input.request),
      ...(input.parent !== undefined && { parent: input.parent }),
    };
    const created = statusEvent('queued', {
      response: emptyResponse({ responseId, createdAt: now, model: input.model }, 'queued'),
    });
    // Journal and record in one round trip: both are sent before either reply is read, and Redis
    // runs (and, with appendfsync always, logs) them in the order sent, so no record is on disk
    // without its journal entry before it.
    const journalled = this.redis.zadd(schedulerKeys.intake, now, id);
    const written = this.scripts.create(
      keys.task,
      keys.events,
      keys.channel,
      keys.inputs,
      keys.tokens,
      now,
      Object.keys(fields).length,
      ...Object.entries(fields).flat(),
      'response.created',
      JSON.stringify(created.data),
    );
    // A fresh id cannot exist yet, so its enqueue goes out in the same round trip, behind the
    // record (Redis runs them in order): the scheduler hears of the task one round trip sooner.
    // Its queued state is known too: attempt 0, and the one event above is number 1.
    // The journal entry stays until the record is known written: were the record late (its
    // script retried after a Redis restart emptied the script cache) or failed, the worker's claim
    // refuses the job of a task not there yet, and the reconciler queues it again from the journal.
    const fresh = input.id === undefined;
    // The operator index (another slot) rides in the same round trip; a lost entry costs only the listing.
    indexCreated(this.redis, { id, tenant: input.tenant, createdAt: now }, this.indexOptions).catch(
      () => undefined,
    );
    const queued = fresh
      ? this.enqueue(
          {
            id,
            tenant: input.tenant,
            createdAt: now,
            model: input.model,
            attempt: 0,
            seq: 1,
            parent: input.parent ?? null,
          },
          true,
        )
      : null;
    const [journal, reply, enqueued] = await Promise.allSettled([journalled, written, queued]);
    if (reply.status === 'rejected') throw reply.reason;
    // A new record is exactly what the script wrote: no read back. A retried id reads what is there.
    const task =
      reply.value[0] === 'ok'
        ? parseTask({ ...fields, ...createdFields(now, Number(reply.value[1])) })
        : await this.get(id);
    if (!task) throw new TasklineError('internal_error', `task ${id} vanished right after ${reply.value[0]}`);
    if (task.tenant !== input.tenant)
      throw new TasklineError('internal_error', 'task id collision across tenants');
    if (reply.value[0] === 'ok') this.observe(task.kind, 'queued', task.createdAt);
    // A fresh id's enqueue went with the record. Otherwise it is not awaited: the record and its
    // journal entry are on disk, which is what the caller may acknowledge; a lost enqueue leaves
    // the journal entry the reconciler queues from. It is sent before this returns, so this
    // connection's later commands see the task queued. Without a journal entry (its write
    // failed) nothing would repair a lost enqueue: wait for it.
    if (task.status !== 'queued') await this.redis.zrem(schedulerKeys.intake, id);
    else if (fresh && enqueued.status === 'fulfilled') {
      // Not awaited: a journal entry left behind only makes the reconciler look at a dispatched task.
      this.redis.zrem(schedulerKeys.intake, id).catch(() => undefined);
      return task;
    } else if (journal.status === 'rejected') await this.enqueue(task);
    else this.enqueue(task).catch(() => undefined);
    return task;
  }

  /**
   * Offers a queued task to the scheduler (enqueue.lua); idempotent, so the reconciler may repeat
   * it. Drops the task's create-journal entry in the same step unless `keepJournal`.
   */
  async enqueue(
    task: Pick<TaskRecord, 'id' | 'tenant' | 'createdAt' | 'model' | 'attempt' | 'seq' | 'parent'>,
    keepJournal = false,
  ): Promise<void> {
    const tenant = queueTenant(task);
    const reply = await this.scripts.enqueue(
      schedulerKeys.ready(tenant, task.model),
      schedulerKeys.running(tenant),
      schedulerKeys.tenants(task.model),
      schedulerKeys.models,
      schedulerKeys.intake,
      schedulerKeys.offered,
      task.id,
      task.createdAt,
      tenant,
      task.model,
      schedulerKeys.wake,
      keepJournal ? '0' : '1',
      offeredState(task),
    );
    if (Array.isArray(reply)) check(task.id, reply);
  }

  /** The task, or null when it never existed, expired, or belongs to another tenant. */
  async get(id: string, tenant?: string): Promise<TaskRecord | null> {
    const raw = await this.redis.hgetall(taskKeys(id).task);
    if (!raw.id) return null;
    const task = parseTask(raw);
    if (tenant !== undefined && task.tenant !== tenant) return null;
    // Expiry is Redis's, by its clock (the ending script PEXPIREs every key of the task): a task
    // Redis still returns is kept. Comparing `expires_at`, a writer's clock, with this process's
    // would read a kept task as gone whenever the two clocks disagree.
    return task;
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
    const task = await this.require(id, tenant ?? undefined);
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
    await this.replicated(id);
    if (outcome === 'cancelled' || outcome === 'cancelling') this.observe(task.kind, outcome, task.createdAt);
    if (outcome === 'cancelled') {
      // Cancelled before any worker claimed it: off the queue, and out of the running cap if dispatched.
      await this.redis
        .multi()
        .zrem(schedulerKeys.ready(queueTenant(task), task.model), id)
        .hdel(schedulerKeys.offered, id)
        .zrem(schedulerKeys.running(queueTenant(task)), id)
        .zrem(schedulerKeys.parked, id)
        .exec();
      await countEnded(this.redis, this.now());
    }
    return { outcome: outcome as CancelOutcome, task: await this.require(id, tenant ?? undefined) };
  }

  /**
   * A worker takes a queued task: it becomes `loading` under a new attempt and a lease, and with
   * `start` (the worker has the model loaded) goes on to `running` in the same step.
   */
  async claim(
    id: string,
    workerId: string,
    leaseMs: number,
    opts: { start?: boolean } = {},
  ): Promise<TaskRecord> {
    const keys = taskKeys(id);
    const event = statusEvent('loading', { worker: workerId });
    const running = opts.start ? statusEvent('running') : null;
    // One round trip: index entry, claim and read-back are sent together and run in that order.
    // Indexed before the claim: a worker that dies right after claiming still leaves a lease to sweep.
    const indexed = this.redis.zadd(schedulerKeys.leases, this.now() + leaseMs, id);
    const claimed = this.scripts.claim(
      keys.task,
      keys.events,
      keys.channel,
      this.now(),
      workerId,
      leaseMs,
      event.type,
      JSON.stringify(event.data),
      ...(running ? [running.type, JSON.stringify(running.data)] : []),
    );
    const read = this.redis.hgetall(keys.task);
    const [index, reply, raw] = await Promise.allSettled([indexed, claimed, read]);
    if (reply.status === 'rejected') throw reply.reason;
    // Refused because the task is gone or finished: drop the entry. Refused because another
    // attempt holds it: the entry is the holder's, and must stay for the sweep.
    if (reply.value[0] === 'missing' || reply.value[0] === 'terminal') {
      await this.redis.zrem(schedulerKeys.leases, id);
    }
    check(id, reply.value);
    const resumed = reply.value[3] === 1;
    // The claim went through without its index entry: write it now, before any work starts.
    if (index.status === 'rejected') await this.redis.zadd(schedulerKeys.leases, this.now() + leaseMs, id);
    const task =
      raw.status === 'rejected' ? await this.require(id) : raw.value.id ? parseTask(raw.value) : null;
    if (!task) throw notFound();
    // A parked task resumed after its answer was running already: no state entered.
    if (!resumed) this.observe(task.kind, 'loading', task.createdAt);
    if (opts.start && !resumed) this.observe(task.kind, 'running', task.createdAt);
    return task;
  }

  /** Extends the lease of `attempt`; returns the status so the worker learns of a cancel or a loss. */
  async renew(id: string, attempt: number, leaseMs: number): Promise<TaskStatus> {
    const reply = await this.scripts.renew(taskKeys(id).task, this.now(), attempt, leaseMs);
    check(id, reply);
    await this.redis.zadd(schedulerKeys.leases, this.now() + leaseMs, id);
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

  /** Appends output events of a running attempt with the tokens they carry (the resume snapshot). */
  async append(
    id: string,
    attempt: number,
    tokens: readonly number[],
    events: EventInput[],
  ): Promise<number> {
    const keys = taskKeys(id);
    const reply = await this.scripts.append(
      keys.task,
      keys.events,
      keys.channel,
      keys.tokens,
      this.now(),
      attempt,
      tokens.map((t) => `${t},`).join(''),
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
    const task = { id, ...(known ?? (await this.require(id))) };
    const result = finish.result ?? null;
    const error = finish.status === 'failed' ? finish.error : null;
    const fields: Record<string, string> = { result: JSON.stringify(result) };
    if (error) fields.error = JSON.stringify(error);
    const seq = await this.transition(id, finish.status, {
      attempt,
      fields,
      events: [...(finish.events ?? []), finalEvent(finish.status, result, task.kind, error)],
    });
    await this.released(task);
    return seq;
  }

  /**
   * Drops an ended task from the lease index and its tenant's running set, so the scheduler's
   * per-tenant cap frees the slot at once. Not in the ending script: these keys live in the
   * `{sched}` slot. A crash in between leaves entries the lease and retention sweeps drop.
   */
  private async released(task: Pick<TaskRecord, 'id' | 'tenant' | 'parent'>): Promise<void> {
    // Two independent removals, sent in one write (no MULTI: neither needs the other).
    await Promise.all([
      this.redis.zrem(schedulerKeys.leases, task.id),
      this.redis.zrem(schedulerKeys.running(queueTenant(task)), task.id),
      countEnded(this.redis, this.now()),
    ]);
  }

  /**
   * The recovery sweep: applies `recover` to every task whose indexed lease lapsed, and drops
   * index entries of tasks nobody holds any more. Safe on any number of replicas at once.
   */
  async sweepLeases(limit = 500): Promise<Recovered[]> {
    const now = this.now();
    const due = await this.redis.zrangebyscore(schedulerKeys.leases, '-inf', now, 'LIMIT', 0, limit);
    const recovered: Recovered[] = [];
    for (const id of due) {
      const done = await this.recoverTask(id, now);
      if (done) recovered.push(done);
      const task = await this.get(id);
      if (!task || task.leaseUntil === null) await this.scripts.lease_unindex(schedulerKeys.leases, id, now);
    }
    return recovered;
  }

  /**
   * The reconciler: every create journalled more than `olderThanMs` ago either made a task, which
   * is queued now if it is still waiting, or failed before it was written, and is forgotten.
   */
  async reconcileIntake(olderThanMs: number, limit = 500): Promise<string[]> {
    const ids = await this.redis.zrangebyscore(
      schedulerKeys.intake,
      '-inf',
      this.now() - olderThanMs,
      'LIMIT',
      0,
      limit,
    );
    const queued: string[] = [];
    for (const id of ids) {
      const task = await this.get(id);
      if (task?.status === 'queued') {
        await this.enqueue(task);
        queued.push(id);
      } else {
        await this.redis.zrem(schedulerKeys.intake, id);
      }
    }
    return queued;
  }

  /** Records a progress message for the task (MCP `statusMessage`), fenced by attempt. */
  async progress(id: string, attempt: number, message: string): Promise<number> {
    const task = await this.require(id);
    return this.transition(id, task.status, {
      attempt,
      from: [task.status],
      fields: { status_message: message },
      events: [statusEvent(task.shownStatus, { status_message: message })],
    });
  }

  /** Asks the caller questions, parking the task while some are open (see inputs.ts). */
  requestInput(
    id: string,
    attempt: number,
    requests: Record<string, unknown>,
  ): Promise<{ waiting: boolean; parked: boolean; answers: Record<string, unknown> }> {
    return inputs.requestInput(this.inputs, id, attempt, requests);
  }

  /** The caller's answers; the last one of the current ask resumes a parked task (see inputs.ts). */
  async provideInput(
    id: string,
    tenant: string,
    answers: Record<string, unknown>,
  ): Promise<{ accepted: number; status: TaskStatus }> {
    const result = await inputs.provideInput(this.inputs, id, tenant, answers);
    await this.replicated(id);
    return result;
  }

  /** Questions of the current ask still open. */
  openInputRequests(id: string): Promise<Record<string, unknown>> {
    return inputs.openInputRequests(this.redis, id);
  }

  answers(id: string): Promise<Record<string, unknown>> {
    return inputs.answers(this.redis, id);
  }

  /** Fails parked tasks past their input deadline with `input_timeout`; returns their ids. */
  sweepInputDeadlines(limit?: number): Promise<string[]> {
    return inputs.sweepInputDeadlines(this.inputs, limit);
  }

  /** How many tasks wait for their caller's input, holding no worker slot. */
  parkedCount(): Promise<number> {
    return this.redis.zcard(schedulerKeys.parked);
  }

  /** Token ids the task's output events carried so far: where `resume` continues from. */
  async snapshot(id: string): Promise<number[]> {
    const raw = (await this.redis.get(taskKeys(id).tokens)) ?? '';
    return raw === '' ? [] : raw.slice(0, -1).split(',').map(Number);
  }

  /**
   * Applies LMSP 7.5 to a task whose lease lapsed before `deadline` (its worker is gone). Returns
   * the new status, or null when there was nothing to do (a live lease, a finished task, a lost race).
   */
  async recover(id: string, deadline = this.now()): Promise<TaskStatus | null> {
    return (await this.recoverTask(id, deadline))?.status ?? null;
  }

  private async recoverTask(id: string, deadline: number): Promise<Recovered | null> {
    const task = await this.get(id);
    if (!task || task.leaseUntil === null || task.leaseUntil >= deadline) return null;
    return this.restartTask(task, 'worker_lost', deadline);
  }

  /**
   * Applies LMSP 7.5 to an attempt a draining worker still runs at its deadline, exactly as if
   * the worker had crashed, fenced by that attempt. A task cancelled meanwhile ends `cancelled`.
   */
  async restart(id: string, attempt: number): Promise<Recovered | null> {
    // Two tries: a cancel may land between the read and the write (`illegal` from the old state).
    for (let i = 0; i < 2; i++) {
      const task = await this.get(id);
      if (!task || task.attempt !== attempt || task.status === 'queued') return null;
      const done = await this.restartTask(task, 'worker_draining');
      if (done) return done;
    }
    return null;
  }

  /** One restart (see restart.ts): the transition, then the queue or the cleanup it needs. */
  private async restartTask(
    task: TaskRecord,
    reason: RestartReason,
    leaseExpiredBefore?: number,
  ): Promise<Recovered | null> {
    const snapshot = task.onRestart === 'resume' ? (await this.snapshot(task.id)).length : 0;
    const plan = restartPlan(task, reason, snapshot, problem);
    if (!plan) return null;
    try {
      const seq = await this.transition(task.id, plan.to, {
        attempt: task.attempt,
        from: [task.status],
        leaseExpiredBefore,
        dropSnapshot: plan.dropSnapshot,
        fields: plan.fields,
        events: plan.events,
      });
      if (plan.to === 'queued') await this.enqueue({ ...task, seq });
      else await this.released(task);
      return { id: task.id, kind: task.kind, status: plan.to, policy: plan.policy };
    } catch (err) {
      if (
        err instanceof TasklineError &&
        ['stale_attempt', 'task_terminal', 'illegal_transition'].includes(err.code)
      ) {
        return null;
      }
      throw err;
    }
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
    const args: (string | number)[] = [taskKeys(id).events, `${after + 1}-0`, '+'];
    if (count) args.push('COUNT', count);
    const raw = (await this.redis.xrange(...(args as [string, string, string]))) as [string, string[]][];
    return raw.map(parseEntry);
  }

  private async historyGone(id: string, after: number): Promise<boolean> {
    const seq = await this.redis.hget(taskKeys(id).task, 'seq');
    return seq !== null && Number(seq) > after && (await this.redis.exists(taskKeys(id).events)) === 0;
  }

  /**
   * The task an earlier create with this key and body made, without reserving anything: lets a
   * caller answer a retry with its task even when a new create would be refused (say, by a cap).
   */
  async findIdempotent(tenant: string, key: string, fingerprint: string): Promise<TaskRecord | null> {
    const recordKey = idempotencyKey(tenant, createHash('sha256').update(key).digest('hex'));
    const [taskId, stored] = await this.redis.hmget(recordKey, 'task', 'fingerprint');
    if (!taskId) return null;
    if (stored !== fingerprint) {
      throw new TasklineError(
        'idempotency_key_reused',
        'This Idempotency-Key was used with a different request.',
      );
    }
    return this.get(taskId, tenant);
  }

  /**
   * Reserves an Idempotency-Key for a create. `replay` names a task an earlier request with the
   * same key and body made; `taskId` is the id to create under otherwise.
   */
  async beginIdempotent(
    tenant: string,
    key: string,
    fingerprint: string,
  ): Promise<{ taskId: string; replay: TaskRecord | null; recordKey: string }> {
    const recordKey = idempotencyKey(tenant, createHash('sha256').update(key).digest('hex'));
    const reply = await this.scripts.idempotency_begin(
      recordKey,
      this.now(),
      newId('task'),
      fingerprint,
      this.options.idempotencyPendingMs,
      this.options.idempotencyTtlS,
    );
    const [state, taskId] = reply as [string, string];
    if (state === 'reused') {
      throw new TasklineError(
        'idempotency_key_reused',
        'This Idempotency-Key was used with a different request.',
      );
    }
    if (state === 'new') return { taskId, replay: null, recordKey };
    const existing = await this.get(taskId, tenant);
    if (existing) {
      await this.scripts.idempotency_finish(recordKey, taskId);
      return { taskId, replay: existing, recordKey };
    }
    if (state === 'pending') {
      throw new TasklineError(
        'idempotency_key_in_use',
        'A request with this Idempotency-Key is still being accepted.',
      );
    }
    // `done` whose task has since expired, or a takeover of an abandoned create: create it now.
    return { taskId, replay: null, recordKey };
  }

  async finishIdempotent(recordKey: string, taskId: string): Promise<void> {
    await this.scripts.idempotency_finish(recordKey, taskId);
  }

  /** Creates a task once per (tenant, Idempotency-Key); same key and body give the same task. */
  async createIdempotent(
    input: NewTask,
    key: string,
    fingerprint: string,
  ): Promise<{ task: TaskRecord; replayed: boolean }> {
    const begun = await this.beginIdempotent(input.tenant, key, fingerprint);
    // A replay may answer a retry of a create whose first answer was replication_timeout.
    if (begun.replay) {
      await this.replicated(begun.replay.id, begun.recordKey);
      return { task: begun.replay, replayed: true };
    }
    // The record that names the task must survive a failover as the task does, or a retry
    // after one would create a second task.
    const task = await this.persist({ ...input, id: begun.taskId });
    await this.replicated(task.id, begun.recordKey);
    await this.finishIdempotent(begun.recordKey, task.id);
    return { task, replayed: false };
  }

  /**
   * One state change through transition.lua. `from` defaults to every legal source of `to` in the
   * state table; `attempt` fences it to the caller's attempt.
   */
  async transition(
    id: string,
    to: TaskStatus,
    opts: {
      attempt?: number;
      from?: TaskStatus[];
      leaseExpiredBefore?: number;
      /** Drop the resume snapshot in the same step (a `retry` runs again from the start). */
      dropSnapshot?: boolean;
      fields?: Record<string, string>;
      events: EventInput[];
    },
  ): Promise<number> {
    const keys = taskKeys(id);
    const fields = opts.fields ?? {};
    const reply = await this.scripts.transition(
      keys.task,
      keys.events,
      keys.channel,
      keys.inputs,
      keys.tokens,
      this.now(),
      to,
      (opts.from ?? sourcesOf(to)).join(','),
      opts.attempt ?? '',
      opts.leaseExpiredBefore ?? '',
      this.options.taskRetentionMs,
      this.options.eventRetentionMs,
      isTerminal(to) ? 1 : 0,
      opts.dropSnapshot ? 1 : 0,
      Object.keys(fields).length,
      ...Object.entries(fields).flat(),
      ...flattenEvents(opts.events),
    );
    check(id, reply);
    // A progress message keeps the status: only a change of state is a transition.
    if (!opts.from || opts.from.some((s) => s !== to))
      this.observe(reply[3] as TaskKind, to, Number(reply[4]));
    return Number(reply[2]);
  }

  private get indexOptions() {
    return { max: this.options.operatorIndexMax ?? 10_000, retentionMs: this.options.taskRetentionMs };
  }

  private observe(kind: TaskKind, state: TaskStatus, createdAt: number): void {
    this.options.onTransition?.({ kind, state, terminal: isTerminal(state), createdAt });
  }

  private async require(id: string, tenant?: string): Promise<TaskRecord> {
    const task = await this.get(id, tenant);
    if (!task) throw notFound();
    return task;
  }
}

/** Turns a refused script reply into the matching TasklineError. */
function check(id: string, reply: ScriptReply): void {
  const [code, status] = reply;
  switch (code) {
    case 'ok':
      return;
    case 'missing':
      throw notFound();
    case 'terminal':
      throw new TasklineError('task_terminal', `task ${id} is already ${status}`, { status });
    case 'stale':
      throw new TasklineError('stale_attempt', `task ${id} belongs to a newer attempt`, { status });
    case 'lease_held':
      throw new TasklineError('illegal_transition', `task ${id} is still leased`, { status });
    case 'corrupt':
      // A script found that one of its writes would fail and wrote nothing (refuseUnwritable).
      throw new TasklineError('internal_error', `task ${id}: ${status}; nothing was written`);
    default:
      throw new TasklineError('illegal_transition', `task ${id} cannot move from ${status}`, { status });
  }
}

export function notFound(): TasklineError {
  return new TasklineError('task_not_found', 'No task with this id exists.');
}

export function problem(code: string, detail: string, status = 500): Problem {
  return {
    type: `https://taskline.dev/problems/${code}`,
    title: code.replace(/_/g, ' '),
    status,
    detail,
    code,
  };
}

function flattenEvents(events: EventInput[]): string[] {
  return events.flatMap((e) => [e.type, JSON.stringify(e.data)]);
}

function parseEntry([id, fields]: [string, string[]]): StoredEvent {
  const map: Record<string, string> = {};
  for (let i = 0; i < fields.length; i += 2) map[fields[i]!] = fields[i + 1]!;
  return { seq: Number(id.slice(0, id.indexOf('-'))), type: map.type ?? '', data: map.data ?? '{}' };
}

/** The fields create.lua sets besides the caller's (keep in step with the script). */
function createdFields(now: number, seq: number): Record<string, string> {
  const at = String(now);
  return { status: 'queued', attempt: '0', seq: String(seq), created_at: at, updated_at: at };
}

const json = (value: string | undefined) => (value === undefined ? null : JSON.parse(value));
const num = (value: string | undefined) => (value === undefined ? null : Number(value));

function parseTask(raw: Record<string, string>): TaskRecord {
  const status = raw.status;
  if (!isTaskStatus(status))
    throw new TasklineError('internal_error', `task ${raw.id} has unknown status ${status}`);
  return {
    id: raw.id!,
    tenant: raw.tenant!,
    kind: raw.kind as TaskKind,
    status,
    shownStatus: visibleStatus(status, raw.shown),
    attempt: Number(raw.attempt ?? 0),
    seq: Number(raw.seq ?? 0),
    createdAt: Number(raw.created_at),
    updatedAt: Number(raw.updated_at),
    endedAt: num(raw.ended_at),
    expiresAt: num(raw.expires_at),
    onRestart: raw.on_restart as OnRestart,
    model: raw.model ?? '',
    responseId: raw.response_id ?? '',
    request: json(raw.request),
    result: json(raw.result),
    error: json(raw.error),
    statusMessage: raw.status_message ?? null,
    leaseOwner: raw.lease_owner ?? null,
    leaseUntil: num(raw.lease_until),
    parked: raw.parked !== undefined,
    inputDeadline: num(raw.input_deadline),
    parent: raw.parent ?? null,
  };
}

/** Renders a stored event as the JSON object clients receive (LMSP 1.0 section 6.3). */
export function eventObject(event: StoredEvent): Record<string, unknown> {
  return { type: event.type, sequence_number: event.seq, ...(JSON.parse(event.data) as object) };
}

/**
 * `JSON.stringify(eventObject(event))` without parsing the stored JSON: the fields go in front of
 * the stored object's. Every SSE frame is rendered by this, so an api with thousands of streams
 * does not parse and re-serialize each event. Data that names either field itself takes the slow
 * path, so the stored value wins exactly as in eventObject.
 */
export function eventJson(event: StoredEvent): string {
  const { data } = event;
  if (data[0] !== '{' || data.includes('"type"') || data.includes('"sequence_number"'))
    return JSON.stringify(eventObject(event));
  const head = `{"type":${JSON.stringify(event.type)},"sequence_number":${event.seq}`;
  return data === '{}' ? `${head}}` : `${head},${data.slice(1)}`;
}

export type { ResponseObject };
