/**
 * LMSP 1.0 section 7.5 applied to an interrupted attempt, whichever way it was interrupted: its
 * worker vanished (the lease lapsed: `worker_lost`) or it was still running at the deadline of a
 * drain (`worker_draining`). Both go through here, so a rolling update and a crash end a task the
 * same way.
 */
import { emptyResponse, finalEvent, statusEvent, type EventInput } from './response.js';
import { recoveryTarget, shownAfterRestart, type OnRestart, type TaskStatus } from './states.js';
import type { TaskKind, TaskRecord, TraceContexts } from './records.js';

export type RestartReason = 'worker_lost' | 'worker_draining';

/**
 * The event a `retry` restart writes, once per restart: everything the response's earlier
 * attempts streamed (output items, content parts, deltas) is void, and the response starts over
 * from the `response` it carries (empty, `in_progress`). A reader discards what it assembled so
 * far; the events that follow are the new attempt's.
 */
export const RESTART_EVENT_TYPE = 'response.restarted';

/** What the restart did to one task. */
export interface Recovered {
  id: string;
  kind: TaskKind;
  /** The status the task was given (internal: `queued` for a new attempt). */
  status: TaskStatus;
  /** The `on_restart` policy applied, or `cancelling` for a task that was being cancelled. */
  policy: OnRestart | 'cancelling';
  /** Its trace contexts as the restart found them: the attempt's is the one it ended. */
  traces: TraceContexts;
}

/** The transition a restart writes: target, fields and events (see TaskStore.restartTask). */
export interface RestartPlan {
  to: 'queued' | 'failed' | 'cancelled';
  dropSnapshot: boolean;
  fields: Record<string, string>;
  events: EventInput[];
  policy: Recovered['policy'];
}

const DETAIL: Record<RestartReason, string> = {
  worker_lost: 'The worker running this task stopped before it finished.',
  worker_draining: 'The worker running this task was shut down before it finished.',
};

/**
 * What LMSP 7.5 makes of `task` (read just before): `fail` ends it `failed` with
 * `server_restarted`; `retry` queues a new attempt from the start (the snapshot dropped, the
 * restart event written); `resume` queues one that continues after the snapshot; a `cancelling`
 * task ends `cancelled` whatever its policy. A new attempt keeps the status the client saw
 * (`shown`), so its events and reads never step back. A task runs at most `maxAttempts` times
 * counting interruptions only (TASKLINE_MAX_ATTEMPTS; 7.5 sets no cap, docs/lmsp.md says why we
 * do): an answered input request resumes it under a new attempt but is no interruption. The
 * interruption that would start one more run ends it as under `fail`, `server_restarted` (the
 * only restart code 7.5 knows), its detail naming the count. Null: nothing to do.
 */
export function restartPlan(
  task: TaskRecord,
  reason: RestartReason,
  snapshotTokens: number,
  problem: (code: string, detail: string) => TaskRecord['error'],
  maxAttempts: number,
): RestartPlan | null {
  const to = recoveryTarget(task.status, task.onRestart);
  if (!to) return null;
  const interruptions = task.restarts + 1;
  if (to === 'queued' && interruptions >= maxAttempts) {
    const detail = `${DETAIL[reason]} It was interrupted ${interruptions} times and is not run again.`;
    return failed(task, problem('server_restarted', detail)!);
  }
  if (to === 'cancelled') {
    const result = task.kind === 'response' ? emptyResponse(task, 'cancelled') : null;
    return {
      to,
      dropSnapshot: false,
      fields: { result: JSON.stringify(result) },
      events: [finalEvent('cancelled', result, task.kind)],
      policy: 'cancelling',
    };
  }
  if (to === 'failed') return failed(task, problem('server_restarted', DETAIL[reason])!);
  const shown = shownAfterRestart(task.shownStatus);
  const event: EventInput =
    task.onRestart === 'retry'
      ? {
          type: RESTART_EVENT_TYPE,
          data: {
            task_status: shown,
            reason,
            on_restart: 'retry',
            ...(task.kind === 'response' ? { response: emptyResponse(task, 'in_progress') } : {}),
          },
        }
      : statusEvent(shown, { reason, on_restart: task.onRestart, resumed_from_tokens: snapshotTokens });
  return {
    to,
    dropSnapshot: task.onRestart === 'retry',
    fields: { status_message: `restarted (${task.onRestart})`, shown, restarts: String(interruptions) },
    events: [event],
    policy: task.onRestart,
  };
}

/** The task ends `failed` with `error`: its result the empty response carrying it, one final event. */
function failed(task: TaskRecord, error: NonNullable<TaskRecord['error']>): RestartPlan {
  const result = task.kind === 'response' ? { ...emptyResponse(task, 'failed'), error } : null;
  return {
    to: 'failed',
    dropSnapshot: false,
    fields: { error: JSON.stringify(error), result: JSON.stringify(result) },
    events: [finalEvent('failed', result, task.kind, error)],
    policy: task.onRestart,
  };
}
