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

/**
 * Legal next states of the engine. `queued` is re-entered only by a restart (a retried or
 * resumed attempt after a crash or a drain); clients never see that step (VISIBLE_TRANSITIONS).
 */
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

/** States an attempt holds under a lease (claim.lua); an operator requeues one only once it lapsed. */
export function isLeased(status: TaskStatus): boolean {
  return status === 'loading' || status === 'running' || status === 'input_required';
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

/** On-restart policies of LMSP 7.5. */
export const ON_RESTART_POLICIES = ['fail', 'retry', 'resume'] as const;
export type OnRestart = (typeof ON_RESTART_POLICIES)[number];

/**
 * The status clients see may only move along LMSP 1.0 section 7.2's table (plus MCP's
 * `input_required`, entered from `running` and left for `running`, `cancelling` or `failed`).
 * A new attempt of a task is internal: the engine queues and claims it again (`queued`,
 * `loading`), but a task a client saw `running` stays `running` to that client meanwhile.
 */
export const VISIBLE_TRANSITIONS: Readonly<Record<TaskStatus, readonly TaskStatus[]>> = {
  queued: ['loading', 'cancelled', 'failed'],
  loading: ['running', 'cancelling', 'failed'],
  running: ['succeeded', 'failed', 'cancelling', 'input_required'],
  input_required: ['running', 'cancelling', 'failed'],
  cancelling: ['cancelled'],
  succeeded: [],
  failed: [],
  cancelled: [],
};

/**
 * The first step in `statuses` (what one client saw, in order) that the visible table forbids,
 * as "from -> to", or null. A repeat is no step. Events show every change, so each step must be
 * an edge; a poller can miss states, so with `skips` a step only has to go forward along edges.
 */
export function visibleStepViolation(statuses: readonly TaskStatus[], skips = false): string | null {
  for (let i = 1; i < statuses.length; i++) {
    const [from, to] = [statuses[i - 1]!, statuses[i]!];
    if (from === to) continue;
    if (skips ? !reachable(from, to) : !VISIBLE_TRANSITIONS[from].includes(to)) return `${from} -> ${to}`;
  }
  return null;
}

function reachable(from: TaskStatus, to: TaskStatus): boolean {
  const seen = new Set<TaskStatus>([from]);
  const next = [from];
  while (next.length > 0) {
    for (const s of VISIBLE_TRANSITIONS[next.pop()!]) {
      if (s === to) return true;
      if (seen.has(s)) continue;
      seen.add(s);
      next.push(s);
    }
  }
  return false;
}

/** How far a task has visibly come before it ends: a new attempt never shows less. */
const VISIBLE_RANK: Partial<Record<TaskStatus, number>> = { queued: 0, loading: 1, running: 2 };

/**
 * The status a client sees. `shown` is what the task showed when its last attempt was
 * interrupted (`loading` or `running`, the hash field `shown`); while the next attempt is queued
 * or loading, the task keeps showing it. Every other state is shown as it is.
 */
export function visibleStatus(status: TaskStatus, shown: string | null | undefined): TaskStatus {
  const now = VISIBLE_RANK[status];
  const before = shown ? VISIBLE_RANK[shown as TaskStatus] : undefined;
  return now !== undefined && before !== undefined && before > now ? (shown as TaskStatus) : status;
}

/** What an interrupted attempt leaves shown while the next one is queued: `loading` or `running`. */
export function shownAfterRestart(visible: TaskStatus): 'loading' | 'running' {
  return visible === 'queued' || visible === 'loading' ? 'loading' : 'running';
}

/** What recovery does to a task whose worker vanished (LMSP 7.5). */
export function recoveryTarget(
  status: TaskStatus,
  policy: OnRestart,
): 'queued' | 'failed' | 'cancelled' | null {
  if (isTerminal(status) || status === 'queued') return null;
  if (status === 'cancelling') return 'cancelled';
  return policy === 'fail' ? 'failed' : 'queued';
}

/**
 * The transition table as a Mermaid state diagram, as ARCHITECTURE.md shows it: rendered, never
 * drawn by hand, so the picture cannot drift from the table (`scripts/state-diagram.ts` writes it).
 */
export function renderStateDiagram(): string {
  const lines = ['```mermaid', 'stateDiagram-v2', `    [*] --> ${TASK_STATUSES[0]}`];
  for (const from of TASK_STATUSES) for (const to of TRANSITIONS[from]) lines.push(`    ${from} --> ${to}`);
  for (const end of TERMINAL_STATUSES) lines.push(`    ${end} --> [*]`);
  return lines.concat('```', '').join('\n');
}
