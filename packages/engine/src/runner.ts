import type { Finish, TaskRecord, TaskStore } from './store.js';

/** What a worker gives the code that runs one attempt of a task. */
export interface RunContext {
  readonly task: TaskRecord;
  readonly attempt: number;
  /** Aborted when the task is cancelled, the lease is lost, or the worker stops hard. */
  readonly signal: AbortSignal;
  /** For output events (`append`, fenced by `attempt`), progress and input requests. */
  readonly store: TaskStore;
}

/**
 * Runs one kind of task (LMSP responses, MCP tools). The worker owns claiming, leases,
 * cancellation and restart policies; a runner only does the work and says how it ended.
 */
export interface TaskRunner {
  run(ctx: RunContext): Promise<Finish>;
}
