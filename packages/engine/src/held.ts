/**
 * Calls their caller holds open (a keyless, non-background `POST /responses`, an MCP tool call
 * not held as a task): when the caller goes, nobody is left to read the result, and the api
 * replica holding the call cancels its task. That replica may go too, and the caller's
 * connection with it; so each call also has a lease in the scheduler's index (`held`) that its replica
 * renews, and the scheduler cancels the task of a call whose lease lapsed.
 */
import type { Redis } from 'ioredis';
import { sweepEach, type StoreCore, type SweepFailed } from './core.js';
import { TasklineError } from './errors.js';
import { SchedIndex } from './sched/index.js';
import { isTerminal } from './states.js';

/**
 * One api replica's leases on the calls it holds: one `ZADD` when a call begins, one `ZREM` when it
 * ends, and every third of the lease one `ZADD` renewing them all (`GT`: a slower renewal never
 * moves a deadline back), whatever their number. Deadlines are Redis's clock's (lease_index.lua),
 * as the scheduler's sweep reads them: an api host whose clock runs behind keeps its calls.
 */
export class CallHolds {
  private readonly held = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  private readonly sched: SchedIndex;

  constructor(
    private readonly redis: Redis,
    private readonly leaseMs: number,
    /** Told of a failed renewal; the next one, a third of a lease later, tries again. */
    private readonly onError: (err: unknown) => void,
  ) {
    this.sched = new SchedIndex(redis);
  }

  /** Leases the call of task `id` until `release`. */
  async hold(id: string): Promise<void> {
    this.held.add(id);
    this.timer ??= setInterval(() => this.renew(), Math.max(10, Math.floor(this.leaseMs / 3))).unref();
    await this.sched.holdCalls(this.leaseMs, [id]);
  }

  /** The call ended (answered, or its caller left and the task was cancelled here). */
  async release(id: string): Promise<void> {
    this.held.delete(id);
    if (this.held.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
    }
    await this.sched.releaseCall(id);
  }

  private renew(): void {
    if (this.held.size > 0) this.sched.holdCalls(this.leaseMs, [...this.held]).catch(this.onError);
  }
}

/**
 * The scheduler's sweep: the task of every call whose lease lapsed is cancelled (LMSP 1.0 section
 * 7.3, as its caller's leaving would have), then the entry dropped unless renewed meanwhile (a
 * replica that was only slow keeps holding its call). Returns the ids of the tasks it cancelled.
 */
export async function sweepHeldCalls(
  core: StoreCore,
  cancel: (id: string) => Promise<unknown>,
  limit = 500,
  failed?: SweepFailed,
): Promise<string[]> {
  // Scored by Redis's clock (lease_index.lua): read by it too, never by the scheduler's.
  const { now, due } = await core.sched.dueHeldCalls(limit);
  const cancelled: string[] = [];
  await sweepEach(
    due,
    async (id) => {
      const task = await core.get(id);
      if (task && !isTerminal(task.status)) {
        try {
          await cancel(id);
          cancelled.push(id);
        } catch (err) {
          // Ended or expired since the read: nothing is left to cancel.
          if (!(err instanceof TasklineError && ['task_not_cancelable', 'task_not_found'].includes(err.code)))
            throw err;
        }
      }
      await core.sched.unholdAsRead(id, now);
    },
    failed,
  );
  return cancelled;
}
