// The operator index: what the console reads and does across tenants (workers, backlogs, requeue).
import type { Redis } from 'ioredis';
import { operatorKeys, taskKeys } from './keys.js';
import { SchedIndex } from './sched/index.js';
import { leaderLease, readWorkerSnapshot, type WorkerSnapshot } from './sched/views.js';
import { bucketOf, createdField, endedField, FAILURE_BUCKETS, minuteOf } from './operator-index.js';
import type { TaskKind, TaskRecord } from './records.js';
import { isLeased, isTaskStatus, isTerminal, type TaskStatus } from './states.js';
import type { TaskStore } from './store.js';
import { notFound, TasklineError } from './errors.js';
import { isWellFormedId } from './ids.js';

/** A row of a tenant's task list. */
export interface TaskRow {
  id: string;
  kind: TaskKind;
  status: TaskStatus;
  model: string;
  /** A tool task's tool (its request's); null for a response. */
  tool: string | null;
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

/** The tool a tool task's stored request names; null when it names none. */
function toolOf(request: string | null | undefined): string | null {
  const tool = request ? (JSON.parse(request) as { tool?: unknown }).tool : undefined;
  return typeof tool === 'string' ? tool : null;
}

/** Reads for the operator console: bounded, index-driven, never a SCAN. */
export class OperatorView {
  private readonly sched: SchedIndex;

  constructor(
    private readonly store: TaskStore,
    private readonly now: () => number = Date.now,
  ) {
    this.sched = new SchedIndex(store.redis);
  }

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
  dispatched(tenants: string[]): Promise<Map<string, number>> {
    return this.sched.runningCounts(tenants);
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

  workers(): Promise<WorkerSnapshot | null> {
    return readWorkerSnapshot(this.redis);
  }

  /** The scheduler leader's control address, or null when no replica leads. */
  leader(): Promise<{ address: string; ttlMs: number } | null> {
    return leaderLease(this.redis);
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
    const place = seen?.status === 'queued' ? await this.sched.placeOf(seen) : null;
    const task = seen?.status === 'queued' ? await this.store.get(id) : seen;
    if (!task) throw notFound();
    const leased = isLeased(task.status);
    if (!leased && task.status !== 'queued') {
      throw new TasklineError(
        'illegal_transition',
        `task ${id} is ${task.status}; only a stuck task is requeued`,
        {
          status: task.status,
        },
      );
    }
    const seq = await this.store.requeue(task, { action: 'requeue', operator, at: this.now() });
    // A leased task's places are its attempt's or older; a queued one's offer or job is taken for
    // lost, and the place read goes too, only that one.
    const placed = leased || place === null ? task.attempt : Math.max(task.attempt, Number(place));
    await this.store.enqueue({ ...task, seq }, false, placed);
    return (await this.store.get(id))!;
  }

  /**
   * The stored requests of the tool tasks among `replies` (ROW_FIELDS of `ids`), by id: read only
   * for those, since a response's request holds its whole input. The built-in tools share one
   * queue, so a tool task's model does not name its tool; its request does.
   */
  private async toolRequests(ids: string[], replies: unknown[]): Promise<Map<string, string | null>> {
    const tools = ids.filter((_, i) => (replies[i] as (string | null)[] | null)?.[1] === 'tool');
    const requests = await Promise.all(tools.map((id) => this.redis.hget(taskKeys(id).task, 'request')));
    return new Map(tools.map((id, i) => [id, requests[i] ?? null]));
  }

  private async rowsOf(ids: string[]): Promise<(TaskRow | null)[]> {
    if (ids.length === 0) return [];
    // Each task is its own slot: separate commands (one write all the same, see readyBacklog).
    const replies = await Promise.all(ids.map((id) => this.redis.hmget(taskKeys(id).task, ...ROW_FIELDS)));
    const requests = await this.toolRequests(ids, replies);
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
        tool: kind === 'tool' ? toolOf(requests.get(id)) : null,
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
