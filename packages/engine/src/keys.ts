/**
 * The Redis key layout. Every key of one task shares the hash tag `{<taskId>}`, so each task
 * script touches one hash slot and the layout works unchanged on Redis Cluster. docs/engine.md
 * ("Redis key layout") explains why each key lives where it does. This file is also the
 * `@taskline/engine/keys` face for tests and tools that inspect Redis, so it re-exports the
 * scheduler index's layout from its owner (src/sched/keys.ts), which no other engine file reads.
 */
export { schedulerKeys, offeredState, parseOfferedState, type QueuedState } from './sched/keys.js';

export const taskKeys = (id: string) =>
  ({
    task: `tl:{${id}}:task`,
    events: `tl:{${id}}:events`,
    channel: `tl:{${id}}:ev`,
    inputs: `tl:{${id}}:inputs`,
    tokens: `tl:{${id}}:tokens`,
    /** Left by an idempotent create, outliving the task: the id's task was made (create.lua). */
    created: `tl:{${id}}:created`,
    /**
     * Webhook deliveries still to be queued (stream; entries `seqs` = the event numbers): written
     * by the script that writes the events (`_emit.lua`), emptied and deleted by the webhook relay.
     */
    outbox: `tl:{${id}}:outbox`,
  }) as const;

/** A one-use mark of task `id` (an answer link's nonce, once.ts): in the task's slot, expiring with the link. */
export const onceKey = (id: string, nonce: string) => `tl:{${id}}:once:${nonce}`;

/**
 * The channel a worker hears cancels of the tasks it holds on (cancel.lua publishes the task id):
 * one subscription per worker, instead of one per task that would echo every event it writes.
 */
export const WORKER_CANCEL_PREFIX = 'tl:cancel:';
export const workerCancelChannel = (workerId: string) => `${WORKER_CANCEL_PREFIX}${workerId}`;

/** One idempotency record per tenant and key; the key is hashed so any visible ASCII is safe. */
export const idempotencyKey = (tenant: string, keyHash: string) => `tl:idem:{${tenant}}:${keyHash}`;

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
} as const;
