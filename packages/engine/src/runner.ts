// What a worker gives the code that runs one attempt of a task, and how an attempt ends.
import type { TaskRecord } from './records.js';
import type { Finish, TaskStore } from './store.js';

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
 * How an attempt ended: a Finish the worker commits, or `parked`: the attempt asked its caller
 * questions and let the task go (see `TaskStore.requestInput`); the worker writes nothing more and
 * frees its slot, and the answers resume the task under a new attempt.
 */
export type RunOutcome = Finish | { status: 'parked' };

/**
 * Runs one kind of task (LMSP responses, MCP tools). The worker owns claiming, leases,
 * cancellation and restart policies; a runner only does the work and says how it ended.
 */
export interface TaskRunner {
  run(ctx: RunContext): Promise<RunOutcome>;
}
