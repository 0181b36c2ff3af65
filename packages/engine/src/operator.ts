// The operator index: what the console reads and does across tenants (workers, backlogs, requeue).
import type { Redis } from 'ioredis';
import { operatorKeys, queueTenant, schedulerKeys, taskKeys } from './keys.js';
import { bucketOf, createdField, endedField, FAILURE_BUCKETS, minuteOf } from './operator-index.js';
import type { TaskKind, TaskRecord } from './records.js';
import { statusEvent } from './response.js';
import { isTaskStatus, isTerminal, shownAfterRestart, type TaskStatus } from './states.js';
import type { TaskStore } from './store.js';
import { notFound, TasklineError } from './errors.js';
import { isWellFormedId } from './ids.js';

export interface WorkerSnapshot {
  scheduler: string;
  at: number;
  workers: {
    workerId: string;
    models: { model: string; slots: number; free: number }[];
    draining: boolean;
    lastSeen: number;
    /** Leases the worker renewed since it started (its heartbeat's count); absent from older schedulers. */
    leaseRenewals?: number;
  }[];
}

/** The leader scheduler publishes what its control plane knows of workers (they report only to it). */
export async function writeWorkerSnapshot(redis: Redis, snapshot: WorkerSnapshot, ttlMs: number) {
  await redis.set(operatorKeys.workers, JSON.stringify(snapshot), 'PX', ttlMs);
}

/** One tenant's ready tasks on one model: how many, and the creation time of the oldest. */
export interface ReadyBacklog {
  model: string;
  tenant: string;
  depth: number;
  oldestAt: number;
}

/** The whole ready index, tenant by model (what queue-depth metrics and the console show). */
export async function readyBacklog(redis: Redis): Promise<ReadyBacklog[]> {
  const models = await redis.smembers(schedulerKeys.models);
  const tenantsOf = await Promise.all(models.map((m) => redis.smembers(schedulerKeys.tenants(m))));
  const pairs = models.flatMap((model, i) => tenantsOf[i]!.map((tenant) => ({ model, tenant })));
  // Separate commands, not a pipeline: auto-pipelining sends them in one write all the same, and
  // on a Redis Cluster a pipeline must stay within one node.
  const rows = await Promise.all(
    pairs.map(({ model, tenant }) =>
      Promise.all([
        redis.zcard(schedulerKeys.ready(tenant, model)),
        redis.zrange(schedulerKeys.ready(tenant, model), 0, 0, 'WITHSCORES'),
      ]),
    ),
  );
  const out: ReadyBacklog[] = [];
  pairs.forEach(({ model, tenant }, i) => {
    const depth = rows[i]![0];
    const [, oldest] = rows[i]![1];
    if (depth > 0 && oldest !== undefined) out.push({ model, tenant, depth, oldestAt: Number(oldest) });
  });
  return out;
}

/** A row of a tenant's task list. */
export interface TaskRow {
  id: string;
  kind: TaskKind;
  status: TaskStatus;
  model: string;
  createdAt: number;
  updatedAt: number;
  errorCode: string | null;
}

export interface TaskFilter {
  status?: TaskStatus;
  kind?: TaskKind;
  model?: string;
  /** Only tasks created at or after this time (ms). */
  since?: number;
}

/** How many index entries one page may read at most, whatever its filters: bounded queries. */
const PAGE_READ_LIMIT = 1000;
const ROW_FIELDS = ['id', 'kind', 'status', 'model', 'created_at', 'updated_at', 'error'];

/** Reads for the operator console: bounded, index-driven, never a SCAN. */
export class OperatorView {
  constructor(
    private readonly store: TaskStore,
    private readonly now: () => number = Date.now,
  ) {}

  private get redis(): Redis {
    return this.store.redis;
  }

  /** Tenants that created a task within `withinMs`, most recent first, at most `limit`. */
  async recentTenants(withinMs: number, limit: number): Promise<{ tenant: string; lastCreateAt: number }[]> {
    // Tenants quiet for a retention are dropped by the index sweep (sweepOperatorIndex).
    const since = this.now() - withinMs;
    const raw = await this.redis.zrevrangebyscore(
      operatorKeys.tenants,
      '+inf',
      since,
      'WITHSCORES',
      'LIMIT',
      0,
      limit,
    );
    const out: { tenant: string; lastCreateAt: number }[] = [];
    for (let i = 0; i < raw.length; i += 2) out.push({ tenant: raw[i]!, lastCreateAt: Number(raw[i + 1]) });
    return out;
  }

  /** Dispatched, unfinished tasks per tenant (the scheduler's running sets). */
  async dispatched(tenants: string[]): Promise<Map<string, number>> {
    const rows = await Promise.all(tenants.map((t) => this.redis.zcard(schedulerKeys.active(t))));
    return new Map(tenants.map((t, i) => [t, rows[i]!]));
  }

  /**
   * A page of a tenant's tasks, newest first. `cursor` is what a previous page returned as
   * `next` (`<created ms>:<entries of that ms already seen>`, so tasks created in the same ms are
   * neither skipped nor repeated). Reads at most PAGE_READ_LIMIT entries whatever the filters, so
   * a filter matching little returns a short page with a cursor to go on from.
   */
  async tasks(
    tenant: string,
    filter: TaskFilter,
    limit: number,
    cursor?: string,
  ): Promise<{ rows: TaskRow[]; next: string | null }> {
    const key = operatorKeys.tasks(tenant);
    const rows: TaskRow[] = [];
    const gone: string[] = [];
    const [at, seen] = (cursor ?? '').split(':');
    let score = cursor ? Number(at) : Infinity;
    let skip = cursor ? Number(seen) : 0;
    let read = 0;
    let exhausted = false;
    while (rows.length < limit && read < PAGE_READ_LIMIT) {
      const batch = Math.min(PAGE_READ_LIMIT - read, Math.max(limit * 2, 50));
      const raw = await this.redis.zrevrangebyscore(
        key,
        score === Infinity ? '+inf' : score,
        filter.since ?? '-inf',
        'WITHSCORES',
        'LIMIT',
        skip,
        batch,
      );
      const count = raw.length / 2;
      read += count;
      const records = await this.rowsOf(raw.filter((_, i) => i % 2 === 0));
      let i = 0;
      for (; i < count && rows.length < limit; i++) {
        const entry = Number(raw[2 * i + 1]);
        if (entry === score) skip++;
        else [score, skip] = [entry, 1];
        const row = records[i];
        if (!row) gone.push(raw[2 * i]!);
        else if (matches(row, filter)) rows.push(row);
      }
      if (count < batch && i === count) {
        exhausted = true;
        break;
      }
    }
    // Entries whose task expired: dropped as they are found, so the index trails the tasks.
    if (gone.length > 0) await this.redis.zrem(key, ...gone);
    return { rows, next: exhausted || score === Infinity ? null : `${score}:${skip}` };
  }

  /**
   * A tenant's unfinished tasks by status, read from every one of `unfinished` (the ids its
   * unfinished-task cap holds: every task not yet ended, so the counts are exact, and at most
   * the cap, so the read is bounded; ended ones and create reservations are skipped), and its
   * failures by code over the last hour's counters.
   */
  async tenantCounts(
    tenant: string,
    unfinished: string[],
  ): Promise<{ statuses: Partial<Record<TaskStatus, number>>; failures: Record<string, number> }> {
    const last = bucketOf(this.now());
    const buckets = this.redis.pipeline();
    for (let b = last - FAILURE_BUCKETS + 1; b <= last; b++) buckets.hgetall(operatorKeys.failed(tenant, b));
    const [rows, counted] = await Promise.all([
      this.rowsOf(unfinished.filter((id) => isWellFormedId(id, 'task'))),
      buckets.exec(),
    ]);
    const statuses: Partial<Record<TaskStatus, number>> = {};
    for (const row of rows)
      if (row && !isTerminal(row.status)) statuses[row.status] = (statuses[row.status] ?? 0) + 1;
    const failures: Record<string, number> = {};
    for (const [, value] of counted ?? [])
      for (const [code, n] of Object.entries((value ?? {}) as Record<string, string>))
        failures[code] = (failures[code] ?? 0) + Number(n);
    return { statuses, failures };
  }

  /** Tasks created and ended in each of the last `minutes` minutes, oldest first. */
  async throughput(minutes: number): Promise<{ minute: number; created: number; ended: number }[]> {
    const last = minuteOf(this.now());
    const list = Array.from({ length: minutes }, (_, i) => last - minutes + 1 + i);
    const values = await this.redis.hmget(
      operatorKeys.throughput,
      ...list.map(createdField),
      ...list.map(endedField),
    );
    return list.map((m, i) => ({
      minute: m * 60_000,
      created: Number(values[i] ?? 0),
      ended: Number(values[minutes + i] ?? 0),
    }));
  }

  async workers(): Promise<WorkerSnapshot | null> {
    const raw = await this.redis.get(operatorKeys.workers);
    return raw ? (JSON.parse(raw) as WorkerSnapshot) : null;
  }

  /** The scheduler leader's control address, or null when no replica leads. */
  async leader(): Promise<{ address: string; ttlMs: number } | null> {
    const [value, ttl] = await Promise.all([
      this.redis.get(schedulerKeys.leader),
      this.redis.pttl(schedulerKeys.leader),
    ]);
    return value ? { address: value.slice(value.indexOf(' ') + 1), ttlMs: ttl } : null;
  }

  /**
   * Puts a stuck task back in the queue, recorded in its events as an operator action. Fenced
   * like the recovery sweep: a leased task only once its lease has lapsed (a live worker is
   * not stuck: cancel it instead), a queued one is offered again (its offer or job was lost).
   */
  async requeue(id: string, operator: string): Promise<TaskRecord> {
    const seen = await this.store.get(id);
    // A queued task's place in its tenant's running set (its offer's dispatch, whose job is taken
    // for lost), read before the state acted on: a dispatch after it places the task above it,
    // and keeps that place (enqueue.lua), claimed or not.
    const place =
      seen?.status === 'queued' ? await this.redis.zscore(schedulerKeys.active(queueTenant(seen)), id) : null;
    const task = seen?.status === 'queued' ? await this.store.get(id) : seen;
    if (!task) throw notFound();
    const leased = ['loading', 'running', 'input_required'].includes(task.status);
    if (!leased && task.status !== 'queued') {
      throw new TasklineError(
        'illegal_transition',
        `task ${id} is ${task.status}; only a stuck task is requeued`,
        {
          status: task.status,
        },
      );
    }
    const action = { action: 'requeue', operator, at: this.now() };
    // Queued again inside; what the client saw never steps back (LMSP 7.2), as after a restart.
    const shown = task.shownStatus === 'queued' ? 'queued' : shownAfterRestart(task.shownStatus);
    const seq = await this.store.transition(id, 'queued', {
      from: [task.status],
      // A queued task belongs to no attempt (the script refuses a fence there); a claim that
      // lands first moves it out of `queued`, and this step is refused.
      ...(leased ? { attempt: task.attempt, leaseLapsedAhead: 0 } : {}),
      fields: { status_message: `requeued by operator`, shown },
      events: [statusEvent(shown, { reason: 'operator_requeue', operator_action: action })],
    });
    // A leased task's places are its attempt's or older; a queued one's offer or job is taken for
    // lost, and the place read goes too, only that one.
    const placed = leased || place === null ? task.attempt : Math.max(task.attempt, Number(place));
    await this.store.enqueue({ ...task, seq }, false, placed);
    return (await this.store.get(id))!;
  }

  private async rowsOf(ids: string[]): Promise<(TaskRow | null)[]> {
    if (ids.length === 0) return [];
    // Each task is its own slot: separate commands (one write all the same, see readyBacklog).
    const replies = await Promise.all(ids.map((id) => this.redis.hmget(taskKeys(id).task, ...ROW_FIELDS)));
    // A task Redis returns is kept (its expiry is Redis's, by its clock): `expires_at`, a writer's
    // clock, is not compared with ours, or a replica whose clock runs ahead drops kept tasks.
    return replies.map((value) => {
      const [id, kind, status, model, created, updated, error] = (value ?? []) as (string | null)[];
      if (!id || !isTaskStatus(status)) return null;
      return {
        id,
        kind: kind as TaskKind,
        status,
        model: model ?? '',
        createdAt: Number(created),
        updatedAt: Number(updated),
        errorCode: error ? ((JSON.parse(error) as { code?: string }).code ?? null) : null,
      };
    });
  }
}

function matches(row: TaskRow, f: TaskFilter): boolean {
  return (
    (!f.status || row.status === f.status) &&
    (!f.kind || row.kind === f.kind) &&
    (!f.model || row.model === f.model) &&
    (f.since === undefined || row.createdAt >= f.since)
  );
}
