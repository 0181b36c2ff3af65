/**
 * The Redis key layout. Every key of one task shares the hash tag `{<taskId>}`, so each task
 * script touches one hash slot and the layout works unchanged on Redis Cluster. docs/engine.md
 * ("Redis key layout") explains why each key lives where it does.
 */
export const taskKeys = (id: string) =>
  ({
    task: `tl:{${id}}:task`,
    events: `tl:{${id}}:events`,
    channel: `tl:{${id}}:ev`,
    inputs: `tl:{${id}}:inputs`,
    tokens: `tl:{${id}}:tokens`,
    /** Left by an idempotent create, outliving the task: the id's task was made (create.lua). */
    created: `tl:{${id}}:created`,
  }) as const;

/**
 * The channel a worker hears cancels of the tasks it holds on (cancel.lua publishes the task id):
 * one subscription per worker, instead of one per task that would echo every event it writes.
 */
export const WORKER_CANCEL_PREFIX = 'tl:cancel:';
export const workerCancelChannel = (workerId: string) => `${WORKER_CANCEL_PREFIX}${workerId}`;

/** One idempotency record per tenant and key; the key is hashed so any visible ASCII is safe. */
export const idempotencyKey = (tenant: string, keyHash: string) => `tl:idem:{${tenant}}:${keyHash}`;

/**
 * The scheduler's index: small (ids only), in one slot `{sched}` so dispatch can pick fairly across
 * tenants in one script. `intake` is the create journal the reconciler repairs from.
 */
export const schedulerKeys = {
  intake: 'tl:{sched}:intake',
  /**
   * Ready work is kept per model (a task's model is its queue; MCP tool tasks are stored with the
   * model `tools`), so dispatch fills each model's free slots from that model's tasks only: a
   * tenant's task for a model no worker has free never holds back its tasks for other models.
   */
  models: 'tl:{sched}:models',
  tenants: (model: string) => `tl:{sched}:tenants:${model}`,
  ready: (tenant: string, model: string) => `tl:{sched}:ready:${model}:${tenant}`,
  /**
   * The queued state (see `offeredState`) each ready task was offered in: dispatch hands it on with
   * the pick, so the scheduler names the task's job without reading the task (another slot).
   */
  offered: 'tl:{sched}:offered',
  leases: 'tl:{sched}:leases',
  /**
   * Calls held open by their caller, by the deadline of the lease their api replica renews
   * (held.ts): what the scheduler's sweep cancels the tasks of once their replica is gone.
   */
  held: 'tl:{sched}:held',
  /** The scheduler leader's fenced lease, `<token> <control address>`. */
  leader: 'tl:{sched}:leader',
  /**
   * Tasks parked while they wait for their caller's input, by input deadline: what the deadline
   * sweep scans and the parked-tasks gauge counts.
   */
  parked: 'tl:{sched}:parked',
  /**
   * Tasks of a tenant dispatched and not yet ended: what the scheduler's per-tenant cap counts.
   * Dispatch adds, scored by the attempt the pick's claim starts (what tells a parked attempt's
   * place from a newer one's: park_unindex.lua); every terminal transition removes (a separate
   * step: another slot than the task).
   */
  active: (tenant: string) => `tl:{sched}:active:${tenant}`,
  /** The round-robin cursor of one model's dispatch (dispatch.lua). */
  rr: (model: string) => `tl:{sched}:rr:${model}`,
  /** Picks handed to BullMQ whose job is not queued yet, by pick time: what the reconciler repairs. */
  inflight: 'tl:{sched}:inflight',
  /**
   * Pub/sub channel `enqueue` publishes the offered task's model on, so the leader dispatches at
   * once (visiting that model) instead of at its next poll.
   */
  wake: 'tl:{sched}:wake',
} as const;

/**
 * Child generations of tool tasks are dispatched under an entry of their own per tenant
 * (`<tenant>/children`, a name no tenant id can take), with its own running set: a child always
 * finds room while its parent, which holds a place in the tenant's running cap, waits for it.
 */
const CHILDREN_SUFFIX = '/children';

/** The name a tenant's child generations are indexed under. */
export const childrenQueue = (tenant: string): string => `${tenant}${CHILDREN_SUFFIX}`;

/** The tenant name the scheduler's index files a task under (see CHILDREN_SUFFIX). */
export const queueTenant = (task: { tenant: string; parent?: string | null }): string =>
  task.parent ? childrenQueue(task.tenant) : task.tenant;

/** The tenant a scheduler index name belongs to: what metrics and weights use. */
export const indexTenant = (name: string): string =>
  name.endsWith(CHILDREN_SUFFIX) ? name.slice(0, -CHILDREN_SUFFIX.length) : name;

/** A queued state of a task: attempt and event sequence both move whenever it is queued again. */
export interface QueuedState {
  attempt: number;
  seq: number;
}

/** How `schedulerKeys.offered` writes a queued state. */
export const offeredState = (state: QueuedState): string => `${state.attempt}:${state.seq}`;

/** The queued state `offeredState` wrote, or null for none (an entry offered without one). */
export function parseOfferedState(value: string): QueuedState | null {
  const at = value.indexOf(':');
  if (at < 0) return null;
  return { attempt: Number(value.slice(0, at)), seq: Number(value.slice(at + 1)) };
}

/**
 * A tenant's MCP tool tasks of both eras, what 2025-11-25 `tasks/list` pages through (zset, score
 * 0, members `<createdAt, 15 digits>:<id>` in lex order, so rank is creation order). Written before
 * the task (`indexToolTask`); the retention sweep bounds and expires it beside the operator index,
 * never dropping a task that has not ended (tool-index.ts).
 */
export const toolTaskIndex = (tenant: string) => `tl:mcp:tasks:{${tenant}}`;
/**
 * The entries of `toolTaskIndex` whose tasks may not have ended: added with them, dropped by the
 * sweep once their task has ended. What the sweep keeps past the bound and reads statuses of.
 */
export const toolTaskOpen = (tenant: string) => `tl:mcp:tasks:{${tenant}}:open`;
/** Tenants whose `toolTaskOpen` was not empty at the last sweep (set): every sweep visits them. */
export const toolTaskTenants = 'tl:mcp:tasks:open';

/**
 * The operator index: what the console lists, never shown to tenants. It holds ids and times
 * only; every row is read from the task record itself, so an expired task drops out of the
 * listing the moment its record expires (and its index entry is dropped on that read).
 */
export const operatorKeys = {
  /**
   * A tenant's tasks by creation time (zset id -> created ms). Tagged `{<tenant>}`, not
   * `{<taskId>}`: create.lua touches only the task's slot, so the entry is a separate command in
   * the create's round trip. The scheduler's retention sweep bounds it to the
   * `TASKLINE_OPERATOR_INDEX_MAX` newest entries and sets it to expire the task retention after
   * the sweep that followed the tenant's last create (not each create: two commands each).
   */
  tasks: (tenant: string) => `tl:ops:{${tenant}}:tasks`,
  /** Tenants by their last create (zset tenant -> ms): the console's tenant list, no SCAN. */
  tenants: 'tl:{ops}:tenants',
  /**
   * Tasks created and ended per minute (hash `c:<minute>` / `e:<minute>` -> count): the
   * throughput chart. One `HINCRBY` per create and per end; the retention sweep drops minutes
   * over an hour old.
   */
  throughput: 'tl:{ops}:throughput',
  /**
   * A tenant's failed tasks by error code (hash code -> count) ended in one 5-minute bucket, kept
   * an hour: the console's recent failures. Beside the tenant's index, in its `{<tenant>}` slot.
   */
  failed: (tenant: string, bucket: number) => `tl:ops:{${tenant}}:failed:${bucket}`,
  /** The leader scheduler's view of its workers (JSON), rewritten every second, short-lived. */
  workers: 'tl:{sched}:workers',
} as const;
