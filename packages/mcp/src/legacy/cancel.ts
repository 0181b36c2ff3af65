import { TasklineError, type TaskStore } from '@taskline/engine';

type Redis = TaskStore['redis'];
/** A JSON-RPC request id; `1` and `"1"` are different ids, so keys hold its JSON. */
export type RequestId = string | number;

/** What a cancel that came before its call's task leaves under the call's key. */
const CANCELLED = 'cancelled';
/** Node's longest timer; a longer one fires at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;
const key = (session: string, request: RequestId) => `tl:mcp:call:${session}:${JSON.stringify(request)}`;

/**
 * MCP 2025-11-25, Cancellation utility, for plain (not task-augmented) `tools/call`s served as an
 * engine task: the caller's `notifications/cancelled` names the request, may land on any replica,
 * and must reach the task, so the session's request id maps to the task id in Redis while the
 * call waits. Either side may come first: the call writes its task only where no cancel stands
 * (`SET NX`), the cancel swaps in its mark and reads what stood (`SET GET`), so exactly one of
 * them cancels. Request ids are never reused within a session (MCP base protocol), so a mark
 * left by a cancel of a request that had no task harms nothing; it expires.
 */
export class LegacyCallCancels {
  constructor(
    private readonly redis: Redis,
    /** The session lifetime: no cancel comes once a session has had no request for so long. */
    private readonly ttlS: number,
  ) {}

  /**
   * Ties the session's request to the task serving it until `release`, renewing the tie while
   * the call waits; `cancelled` when the request's cancel had come first.
   */
  async track(
    session: string,
    request: RequestId,
    taskId: string,
  ): Promise<{ cancelled: boolean; release(): Promise<void> }> {
    const k = key(session, request);
    const written = await this.redis.set(k, taskId, 'EX', this.ttlS, 'NX');
    const every = Math.min(this.ttlS * 500, MAX_TIMER_MS);
    const renew = setInterval(() => void this.redis.expire(k, this.ttlS).catch(() => undefined), every);
    renew.unref();
    return {
      cancelled: written === null,
      release: async () => {
        clearInterval(renew);
        // Its answer is sent by now; a tie left behind only expires.
        await this.redis.del(k).catch(() => undefined);
      },
    };
  }

  /** The request's `notifications/cancelled`: the id of its task, if one is tied to it yet. */
  async cancel(session: string, request: RequestId): Promise<string | null> {
    const stood = await this.redis.set(key(session, request), CANCELLED, 'EX', this.ttlS, 'GET');
    return stood === null || stood === CANCELLED ? null : stood;
  }
}

/** Cancels a tenant's task through the engine's cancel; one that has ended or expired is left as it is. */
export async function cancelUnlessEnded(store: TaskStore, taskId: string, tenant: string): Promise<void> {
  try {
    await store.cancel(taskId, tenant);
  } catch (err) {
    const ended =
      err instanceof TasklineError && ['task_not_cancelable', 'task_not_found'].includes(err.code);
    if (!ended) throw err;
  }
}
