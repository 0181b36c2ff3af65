// A tenant's MCP tool tasks: lookup by id and the paged `tasks/list` index.
import type { Admission, TaskReservation } from '@taskline/admission';
import {
  indexToolTask,
  isCluster,
  toolTaskIndex,
  type StoredEvent,
  type TaskRecord,
  type TaskStore,
} from '@taskline/engine';
import { ANSWER_CAPABILITIES, type ToolPlacement, type ToolResult } from '@taskline/tools';
import type { IncomingTrace } from '@taskline/tracing';
import type { McpObserver } from './observe.js';

/** Index entries one page reads at most, live or dead: its cost is bounded whatever lies ahead. */
const PAGE_READS = 1000;
/** Index members sort by creation time; the id keeps members unique and names the task. */
const member = (createdAt: number, id: string) => `${String(createdAt).padStart(15, '0')}:${id}`;

/**
 * A tenant's MCP task by id, or null: tool tasks alone, as LMSP shows its response tasks alone.
 * One store holds both kinds; each surface sees what it created, so an MCP `tasks/result` never
 * hands a Response object where a `CallToolResult` belongs.
 */
export async function findToolTask(store: TaskStore, id: string, tenant: string): Promise<TaskRecord | null> {
  const task = await store.get(id, tenant);
  return task?.kind === 'tool' ? task : null;
}

/**
 * What of a caller's declared client capabilities its task's questions may use (ToolTaskRequest):
 * none (`{}`) from `undefined`, the capabilities of a caller that waits on the call and so cannot
 * be asked anything.
 */
function answerCapabilities(declared: unknown): Record<string, unknown> {
  const all = (typeof declared === 'object' && declared !== null ? declared : {}) as Record<string, unknown>;
  return Object.fromEntries(ANSWER_CAPABILITIES.filter((c) => all[c] !== undefined).map((c) => [c, all[c]]));
}

/** What creating a tool task runs with: the one admission path and this call's place under the cap. */
export interface ToolTaskAdmission {
  admission: Admission;
  /** This call's place under the tenant's unfinished-task cap, taken by the router's admission step. */
  reservation?: TaskReservation;
  observe?: McpObserver;
  /** The trace context the call carried (`_meta.traceparent`, else the HTTP headers). */
  trace?: IncomingTrace;
}

/**
 * Creates an MCP tool task, from either protocol era, under the call's place (`Admission.create`),
 * on the tool's queue with its restart policy (`placement`), with the client capabilities its
 * questions may use: those the caller declared when it holds the task, none (`undefined`) when it
 * waits on the call.
 * The id (the one its place is held under) is indexed before the task is written (sent ahead of
 * its writes on one Redis, which runs them in order; written first on a cluster), so a crash in
 * between leaves an index entry without a task (skipped and dropped by the listing), never a task
 * missing from its tenant's list.
 */
export async function createToolTask(
  store: TaskStore,
  tenant: string,
  tool: string,
  placement: ToolPlacement,
  args: Record<string, unknown>,
  deps: ToolTaskAdmission,
  capabilities: unknown,
): Promise<TaskRecord> {
  const { task } = await deps.admission.create(
    tenant,
    deps.reservation ?? null,
    async (id, traceparent, alongside) => {
      const entry = member(Date.now(), id);
      // On a cluster the list is on another node than the record: written first. On one Redis its
      // writes go out with the record's, ahead of them: run (and logged) first, with no round trip
      // of their own. There they fail alone only on a key of another type, which no listing reads
      // anyway: the task stands.
      const ahead = !isCluster(store.redis);
      if (!ahead) await indexToolTask(store.redis, tenant, entry);
      let listed: Promise<unknown> = Promise.resolve();
      const created = await store.create(
        {
          id,
          fresh: true,
          tenant,
          kind: 'tool',
          traceparent,
          // The tool's own queue and restart policy (ToolPlacement); a tool worker's tasks keep the
          // schema version they were validated against.
          model: placement.queue,
          onRestart: placement.onRestart,
          request: {
            tool,
            arguments: args,
            capabilities: answerCapabilities(capabilities),
            ...(placement.version !== undefined && { version: placement.version }),
          },
        },
        () => {
          if (ahead) listed = indexToolTask(store.redis, tenant, entry).catch(() => undefined);
          alongside();
        },
      );
      await listed;
      return { task: created, replayed: false };
    },
    undefined,
    deps.trace,
  );
  deps.observe?.taskCreated(tenant);
  return task;
}

/**
 * One page of the tenant's tool tasks, oldest first. The cursor is opaque to clients (the last
 * index member read, base64url); entries of tasks that expired are removed on the way. A page
 * reads at most PAGE_READS entries, so one behind many dead entries may come short (even empty)
 * with a cursor to go on.
 */
export async function listToolTasks(
  store: TaskStore,
  tenant: string,
  cursor: string | undefined,
  pageSize: number,
): Promise<{ tasks: TaskRecord[]; nextCursor?: string }> {
  const key = toolTaskIndex(tenant);
  let from = '-';
  if (cursor !== undefined) {
    const last = Buffer.from(cursor, 'base64url').toString();
    if (!/^\d{15}:task_[0-9a-z]{26}$/.test(last)) throw new Error('invalid cursor');
    from = `(${last}`;
  }
  const tasks: TaskRecord[] = [];
  let lastMember: string | undefined;
  for (let read = 0; tasks.length < pageSize && read < PAGE_READS;) {
    const limit = Math.min(pageSize - tasks.length, PAGE_READS - read);
    const members = await store.redis.zrangebylex(key, from, '+', 'LIMIT', 0, limit);
    if (members.length === 0) return { tasks };
    read += members.length;
    // The batch's records at once (one auto-pipelined round trip), not one round trip each.
    const found = await Promise.all(members.map((m) => store.get(m.slice(16), tenant)));
    const gone = members.filter((_, i) => !found[i]);
    if (gone.length > 0) await store.redis.zrem(key, ...gone);
    for (const task of found) if (task) tasks.push(task);
    lastMember = members.at(-1)!;
    from = `(${lastMember}`;
  }
  const more = await store.redis.zrangebylex(key, from, '+', 'LIMIT', 0, 1);
  return more.length > 0 ? { tasks, nextCursor: Buffer.from(lastMember!).toString('base64url') } : { tasks };
}

/** What a `notifications/progress` says, less its token (MCP 2025-11-25, Progress). */
export interface ProgressParams {
  progress: number;
  total?: number;
  message?: string;
}

/**
 * Turns a task's events into progress: each status event that carries counts (`ctx.progress`
 * with `progress`), when its progress is above the last one sent, since MCP wants every
 * notification's progress to increase. Messages without a higher count stay in `statusMessage`.
 */
function progressOf(send: (progress: ProgressParams) => void): (event: StoredEvent) => void {
  let last = -Infinity;
  return (event) => {
    const data = JSON.parse(event.data) as { progress?: unknown; total?: unknown; status_message?: unknown };
    if (typeof data.progress !== 'number' || data.progress <= last) return;
    last = data.progress;
    send({
      progress: data.progress,
      ...(typeof data.total === 'number' && { total: data.total }),
      ...(typeof data.status_message === 'string' && { message: data.status_message }),
    });
  };
}

/**
 * Waits for a tool task a caller chose not to hold as a task, and returns its outcome as the
 * tool's result (a failure or cancellation as an `isError` result). The caller going away
 * (`signal`) cancels the task: nobody is left to read its result.
 */
export async function awaitToolResult(
  admission: Admission,
  task: TaskRecord,
  signal: AbortSignal,
  onProgress?: (progress: ProgressParams) => void,
): Promise<ToolResult> {
  const stop = admission.cancelOnLeave(task, signal);
  let done: TaskRecord | null;
  try {
    done = await admission.awaitEnd(task, signal, onProgress && progressOf(onProgress));
  } finally {
    stop();
  }
  if (done?.status === 'succeeded') return done.result as ToolResult;
  const reason =
    done?.status === 'cancelled'
      ? 'The tool call was cancelled.'
      : (done?.error?.detail ?? 'The tool failed.');
  return { content: [{ type: 'text', text: reason }], isError: true };
}
