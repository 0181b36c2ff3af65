/**
 * What every part of the task store shares: the connection and its scripts, the record read, one
 * fenced transition, the scheduler offer and the release of an ended task. `TaskStore` is the
 * face; lifecycle, idempotency, recovery and input requests are built on this.
 */
import type { Redis } from 'ioredis';
import { ReplicaAck } from './durability.js';
import { notFound } from './errors.js';
import { newId } from './ids.js';
import { taskKeys } from './keys.js';
import type { TaskEnd } from './operator-index.js';
import {
  check,
  parseTask,
  type Offer,
  type TaskKind,
  type TaskRecord,
  type TransitionObserved,
} from './records.js';
import { isCluster, isRedisUnavailable } from './redis.js';
import type { EventInput } from './response.js';
import { SchedIndex } from './sched/index.js';
import { Releases } from './sched/releases.js';
import { loadScripts, type Scripts } from './scripts.js';
import { isTaskStatus, isTerminal, sourcesOf, type TaskStatus } from './states.js';

export interface TaskStoreOptions {
  taskRetentionMs: number;
  eventRetentionMs: number;
  idempotencyTtlS: number;
  idempotencyPendingMs: number;
  /** Newest tasks the operator index keeps per tenant (`TASKLINE_OPERATOR_INDEX_MAX`). */
  operatorIndexMax?: number;
  /** How long a task waits for its caller's input before it fails (`input_timeout`); default a day. */
  inputTimeoutMs?: number;
  /** Runs a task gets, counting interruptions only, before a restart fails it (`server_restarted`); default 5. */
  maxAttempts?: number;
  now?: () => number;
  /**
   * Set where clients are answered (the api): creates, cancels and answers wait this long for
   * every connected Redis replica to have them before they are acknowledged (`WAIT`).
   */
  replicaAckTimeoutMs?: number;
  /** Told of every state change this store's process commits, after it committed. */
  onTransition?: (change: TransitionObserved) => void;
  /**
   * Asked before a top-level task is created (the api): whether its tenant has webhook endpoints.
   * It may index the task for the webhook relay first; a task it answers true for carries
   * `hooks` = '1', and its scripts record its deliveries in its outbox (`_emit.lua`).
   */
  watchWebhooks?: (task: { id: string; tenant: string }) => Promise<boolean>;
  /**
   * Set where tasks are created and their jobs can be queued (the api): a fresh create whose
   * model has a slot the scheduler leader lent and nothing waiting dispatches its own task (see
   * the `loans` of sched/keys.ts) and hands it here to queue its job, skipping the dispatch round. The
   * create does not wait for it; a hand-off lost (a crash) is repaired as a dispatch that died
   * before its BullMQ add. Unset: every create is offered to the leader's rounds.
   */
  handOff?: (task: HandOff) => Promise<void>;
}

/** A task a create dispatched on a lent slot, in the queued state its job is named after. */
export interface HandOff {
  id: string;
  /** The tenant it is indexed under (see queueTenant). */
  tenant: string;
  model: string;
  attempt: number;
  seq: number;
  /** Its stored trace context, when traced. */
  traceparent?: string;
  /**
   * Its record's fields as the create wrote them, when they are small (CARRIED_RECORD_MAX_CHARS):
   * they travel with the job, and the worker of its first attempt runs it without reading it
   * back (see carriedRecord), one round trip fewer before its first token.
   */
  record?: Record<string, string>;
}

/** The store's options from the validated environment (`@taskline/config`), the same for every service. */
export function storeOptionsFromEnv(env: {
  TASKLINE_TASK_RETENTION_S: number;
  TASKLINE_EVENT_RETENTION_S: number;
  TASKLINE_IDEMPOTENCY_TTL_S: number;
  TASKLINE_IDEMPOTENCY_PENDING_MS: number;
  TASKLINE_OPERATOR_INDEX_MAX?: number;
  TASKLINE_INPUT_TIMEOUT_S: number;
  TASKLINE_MAX_ATTEMPTS: number;
}): TaskStoreOptions {
  return {
    operatorIndexMax: env.TASKLINE_OPERATOR_INDEX_MAX,
    inputTimeoutMs: env.TASKLINE_INPUT_TIMEOUT_S * 1000,
    maxAttempts: env.TASKLINE_MAX_ATTEMPTS,
    taskRetentionMs: env.TASKLINE_TASK_RETENTION_S * 1000,
    eventRetentionMs: env.TASKLINE_EVENT_RETENTION_S * 1000,
    idempotencyTtlS: env.TASKLINE_IDEMPOTENCY_TTL_S,
    idempotencyPendingMs: env.TASKLINE_IDEMPOTENCY_PENDING_MS,
  };
}

/** By default an unanswered task fails after a day (TASKLINE_INPUT_TIMEOUT_S). */
const DEFAULT_INPUT_TIMEOUT_MS = 86_400_000;
/** By default a task gets five attempts (TASKLINE_MAX_ATTEMPTS). */
const DEFAULT_MAX_ATTEMPTS = 5;

/** What a sweep over many tasks reads of each (StoreCore.peek): its offer, state and last change. */
export type SweptTask = Offer & Pick<TaskRecord, 'status' | 'parked' | 'updatedAt'>;
const SWEPT_FIELDS = [
  'id',
  'tenant',
  'parent',
  'model',
  'attempt',
  'seq',
  'created_at',
  'status',
  'parked',
  'updated_at',
];

export interface TransitionOptions {
  attempt?: number;
  from?: TaskStatus[];
  /** Only if the lease lapsed by Redis's clock plus this many ms (0: now), never a caller's clock. */
  leaseLapsedAhead?: number;
  /** Drop the resume snapshot in the same step (a `retry` runs again from the start). */
  dropSnapshot?: boolean;
  fields?: Record<string, string>;
  events: EventInput[];
}

export class StoreCore {
  readonly scripts: Scripts;
  /** The scheduler's index: its only writer (sched/keys.ts states its invariants). */
  readonly sched: SchedIndex;
  readonly inputTimeoutMs: number;
  readonly maxAttempts: number;
  private readonly clock: () => number;
  private readonly replicaAck: ReplicaAck | null;
  private readonly releases: Releases;

  constructor(
    readonly redis: Redis,
    readonly options: TaskStoreOptions,
  ) {
    this.scripts = loadScripts(redis);
    this.sched = new SchedIndex(redis, this.scripts);
    this.clock = options.now ?? Date.now;
    this.inputTimeoutMs = options.inputTimeoutMs ?? DEFAULT_INPUT_TIMEOUT_MS;
    this.maxAttempts = options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
    this.replicaAck = options.replicaAckTimeoutMs ? new ReplicaAck(redis, options.replicaAckTimeoutMs) : null;
    this.releases = new Releases(redis, () => this.now());
  }

  now(): number {
    return this.clock();
  }

  /**
   * Resolves once what this store wrote for task `id` (its record, the scheduler's index, and any
   * `also` keys) is on every connected replica of the nodes that hold it (`replication_timeout` if not).
   */
  async replicated(id: string, ...also: string[]): Promise<void> {
    await this.replicaAck?.wait([taskKeys(id).task, this.sched.slotKey, ...also]);
  }

  /**
   * On a Redis Cluster, resolves once `write` (to the scheduler's index) is done and on its
   * node's connected replicas: a write to another node sent after it is not ordered behind it
   * there, and a failover could lose it unreplicated. On one Redis, commands run and are logged in
   * the order sent: nothing to wait for.
   */
  async indexFirst(write: Promise<unknown>): Promise<void> {
    if (!isCluster(this.redis)) return;
    await write;
    await this.replicaAck?.wait([this.sched.slotKey]);
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
   * The fields of the task a sweep over many tasks needs (see SweptTask), null when it is gone: one
   * `HMGET`, never the request or result a whole record carries (up to a create's body each).
   */
  async peek(id: string): Promise<SweptTask | null> {
    const [taskId, tenant, parent, model, attempt, seq, created, status, parked, updated] =
      await this.redis.hmget(taskKeys(id).task, ...SWEPT_FIELDS);
    if (!taskId || !isTaskStatus(status)) return null;
    return {
      id: taskId,
      tenant: tenant!,
      parent: parent ?? null,
      model: model ?? '',
      attempt: Number(attempt ?? 0),
      seq: Number(seq ?? 0),
      createdAt: Number(created),
      status,
      parked: parked !== null,
      updatedAt: Number(updated),
    };
  }

  async require(id: string, tenant?: string): Promise<TaskRecord> {
    const task = await this.get(id, tenant);
    if (!task) throw notFound();
    return task;
  }

  /**
   * Offers a queued task to the scheduler (enqueue.lua); idempotent, so the reconciler may repeat
   * it. Drops the task's create-journal entry in the same step unless `keepJournal`. A place in its
   * tenant's running set scored above `placed` (by default the attempt read, whose dispatch scores
   * one past it) belongs to a dispatch that may have been claimed since the read: the task is then
   * not offered, and false is returned. So too when an offer of a newer queued state waits (the
   * task was queued again since the read): a caller's read is outdated either way, and a newer
   * offer or dispatch holds the task, so false needs no repair.
   */
  enqueue(task: Offer, keepJournal = false, placed = task.attempt): Promise<boolean> {
    return this.sched.offer(task, keepJournal, placed);
  }

  /**
   * One state change through transition.lua. `from` defaults to every legal source of `to` in the
   * state table; `attempt` fences it to the caller's attempt.
   */
  async transition(id: string, to: TaskStatus, opts: TransitionOptions): Promise<number> {
    const keys = taskKeys(id);
    // A worker's write carries a nonce: re-sent after a lost reply, it is not applied twice (transition.lua).
    const fields = opts.attempt === undefined ? (opts.fields ?? {}) : { ...opts.fields, step: newId('step') };
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
      opts.leaseLapsedAhead ?? '',
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

  /**
   * Drops an ended task from the lease index and its tenant's running set, after its ending
   * script (another slot: sched/keys.ts says which sweep repairs a crash between). The releases
   * of one turn of the event loop go together (see Releases).
   */
  released(task: Pick<TaskRecord, 'id' | 'tenant' | 'parent'>, end: TaskEnd): Promise<void> {
    return this.releases.add(task, end);
  }

  /** Token ids the task's output events carried so far: where `resume` continues from. */
  async snapshot(id: string): Promise<number[]> {
    const raw = (await this.redis.get(taskKeys(id).tokens)) ?? '';
    return raw === '' ? [] : raw.slice(0, -1).split(',').map(Number);
  }

  observe(kind: TaskKind, state: TaskStatus, createdAt: number): void {
    this.options.onTransition?.({ kind, state, terminal: isTerminal(state), createdAt });
  }
}

/** Told of a task a sweep could not handle, which the sweep skipped (see `sweepEach`). */
export type SweepFailed = (id: string, error: unknown) => void;

/**
 * Runs a sweep's `step` on each due id in turn. A task it fails on keeps its index entry, so it is
 * due first again next time: were the failure thrown there, every sweep would stop at that task
 * and none after it would ever be swept. So it is skipped and told to `failed`; without `failed`,
 * the first failure is thrown once the others had their turn. A Redis outage is no task's own:
 * it ends the sweep at once.
 */
export async function sweepEach<T>(
  ids: readonly T[],
  step: (id: T) => Promise<void>,
  failed?: (id: T, error: unknown) => void,
): Promise<void> {
  let first: { error: unknown } | null = null;
  for (const id of ids) {
    try {
      await step(id);
    } catch (error) {
      if (isRedisUnavailable(error)) throw error;
      if (failed) failed(id, error);
      else first ??= { error };
    }
  }
  if (first) throw first.error;
}

/** Token ids as the scripts take them for the resume snapshot (append.lua, claim.lua): each followed by ','. */
export function tokenList(tokens: readonly number[]): string {
  return tokens.map((t) => `${t},`).join('');
}

export function flattenEvents(events: EventInput[]): string[] {
  return events.flatMap((e) => [e.type, JSON.stringify(e.data)]);
}
