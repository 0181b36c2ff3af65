/**
 * The one task state machine. LMSP 1.0 section 7.2, plus `input_required` for tasks that ask
 * their caller questions (MCP tool tasks). Every protocol view is a projection of this table;
 * the Lua scripts receive their allowed source states from here rather than keeping a copy.
 */
export const TASK_STATUSES = [
  'queued',
  'loading',
  'running',
  'input_required',
  'cancelling',
  'succeeded',
  'failed',
  'cancelled',
] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

export const TERMINAL_STATUSES = ['succeeded', 'failed', 'cancelled'] as const;
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];

/** Legal next states. `queued` is re-entered only by recovery (a retried or resumed attempt). */
export const TRANSITIONS: Readonly<Record<TaskStatus, readonly TaskStatus[]>> = {
  queued: ['loading', 'cancelled', 'failed'],
  loading: ['running', 'cancelling', 'failed', 'queued'],
  running: ['succeeded', 'failed', 'cancelling', 'input_required', 'queued'],
  input_required: ['running', 'cancelling', 'failed', 'queued'],
  cancelling: ['cancelled'],
  succeeded: [],
  failed: [],
  cancelled: [],
};

export function isTerminal(status: TaskStatus): status is TerminalStatus {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

export function isTaskStatus(value: unknown): value is TaskStatus {
  return typeof value === 'string' && (TASK_STATUSES as readonly string[]).includes(value);
}

/** The states from which `to` may be entered: what a transition script is allowed to leave. */
export function sourcesOf(to: TaskStatus): TaskStatus[] {
  return TASK_STATUSES.filter((from) => TRANSITIONS[from].includes(to));
}

/**
 * What a cancel request does from each state (LMSP 7.3): queued tasks end at once, running work
 * is asked to stop, cancelling and cancelled are idempotent, and the other terminal states refuse.
 */
export const CANCEL_OUTCOME: Readonly<Record<TaskStatus, TaskStatus | 'noop' | 'not_cancelable'>> = {
  queued: 'cancelled',
  loading: 'cancelling',
  running: 'cancelling',
  input_required: 'cancelling',
  cancelling: 'noop',
  cancelled: 'noop',
  succeeded: 'not_cancelable',
  failed: 'not_cancelable',
};

/** MCP Tasks extension statuses (SEP-2663). */
export type McpTaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';

/** The MCP view of a task's status: a projection, never stored. */
export function toMcpStatus(status: TaskStatus): { status: McpTaskStatus; statusMessage?: string } {
  switch (status) {
    case 'queued':
      return { status: 'working', statusMessage: 'queued' };
    case 'loading':
      return { status: 'working', statusMessage: 'loading model' };
    case 'running':
      return { status: 'working', statusMessage: 'running' };
    case 'cancelling':
      return { status: 'working', statusMessage: 'cancelling' };
    case 'input_required':
      return { status: 'input_required' };
    case 'succeeded':
      return { status: 'completed' };
    case 'failed':
      return { status: 'failed' };
    case 'cancelled':
      return { status: 'cancelled' };
  }
}

/** On-restart policies of LMSP 7.5. */
export const ON_RESTART_POLICIES = ['fail', 'retry', 'resume'] as const;
export type OnRestart = (typeof ON_RESTART_POLICIES)[number];

/** What recovery does to a task whose worker vanished (LMSP 7.5). */
export function recoveryTarget(
  status: TaskStatus,
  policy: OnRestart,
): 'queued' | 'failed' | 'cancelled' | null {
  if (isTerminal(status) || status === 'queued') return null;
  if (status === 'cancelling') return 'cancelled';
  return policy === 'fail' ? 'failed' : 'queued';
}
