/** Which `tasks/get` polls the tenant's request rate spares: those that keep to the advertised interval. */
import { isTerminal, type TaskStore } from '@taskline/engine';
import { findToolTask } from './toolTasks.js';

/** A poll's mark, per task (its own slot, as the task's keys): the last poll the rate spared. */
const pollKey = (taskId: string) => `tl:mcp:poll:{${taskId}}`;
/** Slack for network jitter: a poll that follows its predecessor by 90% of the interval keeps to it. */
const JITTER = 0.9;

/**
 * The Tasks extension (MCP 2026-07-28, Task Polling) and MCP 2025-11-25 (Tasks, `pollInterval`)
 * let a server rate-limit only clients that poll faster than the interval it advertises, so
 * polls that keep to it never take from the request rate (TASKLINE_RATE_LIMIT_*): a client may
 * follow as many tasks as it may have unfinished. Spared: a `tasks/get` of a tenant's task that
 * has not ended and was not polled within the interval, and the first read of an ended task (the
 * poll that finds the end). What they cost is bounded: at most one spared poll per interval per
 * unfinished task (at most TASKLINE_MAX_UNFINISHED_TASKS of them) and one per ended task, whose create
 * took from the rate. Anything else (faster polls, unknown ids, other methods) takes from it.
 */
export class PollPacing {
  private readonly spacingMs: number;

  constructor(
    private readonly store: TaskStore,
    intervalMs: number,
  ) {
    this.spacingMs = Math.max(1, Math.floor(intervalMs * JITTER));
  }

  /** Whether this request is a poll the tenant's request rate spares; marks it spared if so. */
  async spared(tenant: string, body: unknown): Promise<boolean> {
    const request = body as { method?: unknown; params?: { taskId?: unknown } } | undefined;
    const taskId = request?.params?.taskId;
    if (request?.method !== 'tasks/get' || typeof taskId !== 'string') return false;
    const task = await findToolTask(this.store, taskId, tenant);
    if (!task) return false;
    const redis = this.store.redis;
    if (!isTerminal(task.status))
      return (await redis.set(pollKey(task.id), 'polled', 'PX', this.spacingMs, 'NX')) === 'OK';
    // The mark of the last poll still there means this one came too soon; once taken, this mark
    // lasts as long as the task.
    if (task.expiresAt === null) return false;
    return (await redis.set(pollKey(task.id), 'ended', 'PXAT', task.expiresAt, 'NX')) === 'OK';
  }
}
