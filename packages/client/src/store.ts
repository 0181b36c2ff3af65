/**
 * Where a client keeps the ids of the tasks it created, so that a restarted client resumes
 * waiting on them. The entry is written *before* the create request is sent (with the
 * Idempotency-Key it will use): a crash between send and reply loses nothing, because resuming
 * sends the same request with the same key and gets the same task back.
 */
export interface TrackedTask {
  /** The client's own id for the entry: the Idempotency-Key for LMSP, the task id for MCP. */
  key: string;
  protocol: 'lmsp' | 'mcp';
  /** Where the task lives (an LMSP base URL or an MCP endpoint). */
  endpoint: string;
  /** Known once the server answered the create. */
  taskId: string | null;
  /** The create body, so an unanswered create can be sent again. */
  request: unknown;
  /** Last status seen (protocol's own words). */
  status: string;
  /** LMSP: last event sequence number handed to the caller, for `Last-Event-ID`. */
  lastEventId: number;
  /** True once a terminal status was seen: nothing left to resume. */
  done: boolean;
  createdAt: number;
  updatedAt: number;
}

export interface TaskIdStore {
  put(task: TrackedTask): Promise<void> | void;
  get(key: string): Promise<TrackedTask | null> | TrackedTask | null;
  /** Every entry not `done`, oldest first. */
  unfinished(): Promise<TrackedTask[]> | TrackedTask[];
}

/** For tests and short-lived scripts: nothing survives the process. */
export class MemoryTaskIdStore implements TaskIdStore {
  private readonly tasks = new Map<string, TrackedTask>();

  put(task: TrackedTask): void {
    this.tasks.set(task.key, { ...task });
  }

  get(key: string): TrackedTask | null {
    const t = this.tasks.get(key);
    return t ? { ...t } : null;
  }

  unfinished(): TrackedTask[] {
    return [...this.tasks.values()]
      .filter((t) => !t.done)
      .sort((a, b) => a.createdAt - b.createdAt)
      .map((t) => ({ ...t }));
  }
}

/** Updates an entry in place (no-op when the store lost it). */
export async function patchTracked(
  store: TaskIdStore,
  key: string,
  patch: Partial<TrackedTask>,
  now: number,
): Promise<void> {
  const current = await store.get(key);
  if (current) await store.put({ ...current, ...patch, updatedAt: now });
}
