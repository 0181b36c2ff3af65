// 2025-era cancels (`notifications/cancelled`) of calls on any replica, even before their task exists.
import { TasklineError, type TaskStore } from '@taskline/engine';
import { ReplicaChannel } from './channel.js';

type Redis = TaskStore['redis'];
/** A JSON-RPC request id; `1` and `"1"` are different ids, so keys hold its JSON. */
export type RequestId = string | number;

/** What a cancel that came before its call's task leaves under the call's key. */
const CANCELLED = 'cancelled';
/** Node's longest timer; a longer one fires at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;
const key = (session: string, request: RequestId) => `tl:mcp:call:${session}:${JSON.stringify(request)}`;
/** Where a cancel no task took is told to every replica: the message is the call's key. */
const INLINE_CHANNEL = 'tl:mcp:call:cancelled';

/**
 * MCP 2025-11-25, Cancellation utility, for plain (not task-augmented) `tools/call`s served as an
 * engine task: the caller's `notifications/cancelled` names the request, may land on any replica,
 * and must reach the task, so the session's request id maps to the task id in Redis while the
 * call waits. Either side may come first: the call writes its task only where no cancel stands
 * (`SET NX`), the cancel swaps in its mark and reads what stood (`SET GET`), so exactly one of
 * them cancels. Request ids are never reused within a session (MCP base protocol), so a mark
 * left by a cancel of a request that had no task harms nothing; it expires.
 *
 * Requests the SDK serves inside their POST (inline tool calls...) are held in this replica's
 * memory only, so a call never cancelled costs Redis nothing. A cancel finds such a call here
 * directly; one no task took is also published, with the call's key (so scoped to the session,
 * which only its tenant can name), on a `ReplicaChannel`. A cancel published before its call was
 * held here, or while the subscriber reconnects, reaches nothing, as a cancel of a request not
 * seen yet (the base protocol lets it be ignored).
 */
export class LegacyCallCancels {
  /** The requests served inline on this replica, by key: each one's cancel. */
  private readonly inline: ReplicaChannel;

  constructor(
    private readonly redis: Redis,
    /** The session lifetime: no cancel comes once a session has had no request for so long. */
    private readonly ttlS: number,
  ) {
    this.inline = new ReplicaChannel(redis, INLINE_CHANNEL);
  }

  /**
   * Holds a request served inline on this replica until the returned release: its cancel, from
   * any replica, calls `cancel`. The first one subscribes this replica to the cancels; the request
   * does not wait for it (a cancel published meanwhile is one of those that reach nothing).
   */
  hold(session: string, request: RequestId, cancel: () => void): () => void {
    return this.inline.hold(key(session, request), cancel);
  }

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

  /**
   * The request's `notifications/cancelled`: an inline request held here is cancelled at once;
   * otherwise the id of its task, if one is tied to it yet, and if none, every replica is told.
   */
  async cancel(session: string, request: RequestId): Promise<string | null> {
    const k = key(session, request);
    if (this.inline.tellHere(k)) return null;
    const stood = await this.redis.set(k, CANCELLED, 'EX', this.ttlS, 'GET');
    if (stood === null) await this.inline.publish(k);
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
