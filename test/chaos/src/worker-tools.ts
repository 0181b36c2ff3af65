/**
 * Tool tasks a separate tool worker runs, under chaos: `worker_steps` (resume) and
 * `worker_steps_retry` (retry) from the conformance fixtures' tool module, served by two
 * tool-worker processes that the faults SIGKILL and drain past their deadline. The tasks join the
 * run's tracked tasks (so every task invariant covers them); what this file checks besides, from
 * each task's progress events (`attempt <a> start|done <s>`, a `done` written after its checkpoint):
 * - under `resume` no step an earlier attempt completed is started again;
 * - under `retry` every attempt starts over at step 0;
 * - a completed task's checkpoint holds every step, and its last attempt ran the steps after the
 *   previous checkpoint (minimums.ts requires MIN_WORKER_TOOL_TASKS of them).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { TaskStore } from '@taskline/engine';
import { taskKeys } from '@taskline/engine/keys';
import { mcpOfA } from './client.js';
import { tracked, TERMINAL_BOUND_MS, type Invariant } from './observed.js';

/**
 * Worker-served tool tasks a run must have acknowledged: a 20 s run calls about 33 times, and
 * under its faults and the tenant's limits about a third of the calls become tasks.
 */
export const MIN_WORKER_TOOL_TASKS = 6;
/** The invariant names, for minimums.ts. */
export const WORKER_TOOLS_INVARIANT = 'worker-served tool tasks end; a completed one checkpointed every step';
export const RESUMED_INVARIANT =
  'a restarted worker tool task keeps its policy: resume never repeats a completed step, retry starts over';
const STEPS = 8;
/**
 * Long enough for a fault to land mid-task: eight steps take 2.4 s, more than a lease, so a tool
 * worker killed or drained every few seconds interrupts a few of them in a 20 s run.
 */
const STEP_MS = 300;

const TOOLS = { worker_steps: 'resume', worker_steps_retry: 'retry' } as const;
type ToolName = keyof typeof TOOLS;
const made = new Map<string, ToolName>();
/** Calls that made a task, and those that never did, by their last answer (status or error). */
const stats = { created: 0, refused: 0, refusals: {} as Record<string, number> };

/** One call of a worker-served tool, retried while refused (no live worker lists it for a moment). */
export async function workerToolTask(lb: string, until: number): Promise<void> {
  const tool: ToolName = Math.random() < 0.5 ? 'worker_steps' : 'worker_steps_retry';
  let last = 'no answer';
  for (let i = 0; i < 10 && Date.now() < until + 5000; i++) {
    const created = await mcpOfA(lb, 'tools/call', {
      name: tool,
      arguments: { count: STEPS, step_ms: STEP_MS },
    });
    last = created?.message?.error?.message ?? String(created?.reply.status ?? 'no answer');
    const result = created?.message?.result as { resultType?: string; taskId?: string } | undefined;
    if (result?.resultType === 'task' && result.taskId) {
      stats.created++;
      made.set(result.taskId, tool);
      tracked.set(result.taskId, {
        id: result.taskId,
        via: 'mcp',
        onRestart: TOOLS[tool],
        cancelRequested: false,
        terminalSeen: [],
      });
      return;
    }
    await sleep(500);
  }
  stats.refused++;
  stats.refusals[last] = (stats.refusals[last] ?? 0) + 1;
}

/** The steps each attempt started and completed, from the task's progress events. */
async function stepsOf(store: TaskStore, id: string) {
  const started = new Map<number, number[]>();
  const done = new Map<number, number[]>();
  for (const e of (await store.events(id, 0)).events) {
    const m = /^attempt (\d+) (start|done) (\d+)$/.exec(
      String((JSON.parse(e.data) as { status_message?: string }).status_message ?? ''),
    );
    if (!m) continue;
    const into = m[2] === 'start' ? started : done;
    into.set(Number(m[1]), [...(into.get(Number(m[1])) ?? []), Number(m[3])]);
  }
  return { started, done };
}

/** Violations of `id`'s policy: a resumed attempt repeating a completed step, a retry not starting over. */
function policyViolations(id: string, tool: ToolName, steps: Awaited<ReturnType<typeof stepsOf>>) {
  const out: string[] = [];
  const completed = new Set<number>();
  for (const attempt of [...steps.started.keys()].sort((a, b) => a - b)) {
    const started = steps.started.get(attempt)!;
    if (TOOLS[tool] === 'resume') {
      const repeated = started.filter((s) => completed.has(s));
      if (repeated.length > 0)
        out.push(`${id}: attempt ${attempt} ran completed steps ${repeated.join(',')}`);
    } else if (started[0] !== 0) out.push(`${id}: retry attempt ${attempt} started at step ${started[0]}`);
    for (const s of steps.done.get(attempt) ?? []) completed.add(s);
  }
  return out;
}

/**
 * A succeeded task's checkpoint holds every step, and its last attempt ran exactly the steps after
 * the checkpoint it resumed from: none (killed after its last checkpoint) up to all of them.
 */
async function completedViolations(store: TaskStore, id: string, tool: ToolName): Promise<string[]> {
  const checkpoint = JSON.parse((await store.redis.hget(taskKeys(id).task, 'checkpoint')) ?? 'null') as {
    done?: number;
  } | null;
  const rec = await store.get(id);
  const ran =
    (rec?.result as { structuredContent?: { ran?: number[] } } | null)?.structuredContent?.ran ?? [];
  const from = STEPS - ran.length;
  const out: string[] = [];
  if (checkpoint?.done !== STEPS)
    out.push(`${id} (${tool}) succeeded with checkpoint ${JSON.stringify(checkpoint)}`);
  // Under retry every attempt starts over, so the one that succeeded ran them all.
  if (ran.some((s, i) => s !== from + i) || (TOOLS[tool] === 'retry' && from !== 0))
    out.push(`${id} (${tool}) succeeded, its last attempt ran ${ran.join(',')}`);
  return out;
}

/** Waits (within the terminal bound) for every worker tool task to end, then checks them. */
export async function checkWorkerToolTasks(store: TaskStore): Promise<Invariant[]> {
  const ran: Invariant = { name: WORKER_TOOLS_INVARIANT, checked: 0, violations: [] };
  const resumed: Invariant = { name: RESUMED_INVARIANT, checked: 0, violations: [] };
  const deadline = Date.now() + TERMINAL_BOUND_MS;
  for (const [id, tool] of made) {
    let rec = await store.get(id);
    while (rec && !['succeeded', 'failed', 'cancelled'].includes(rec.status) && Date.now() < deadline) {
      await sleep(500);
      rec = await store.get(id);
    }
    ran.checked++;
    if (!rec) {
      ran.violations.push(`${id} (${tool}) is missing`);
      continue;
    }
    const steps = await stepsOf(store, id);
    // Counted where an attempt followed another: that is where a policy shows.
    if (steps.started.size > 1) resumed.checked++;
    resumed.violations.push(...policyViolations(id, tool, steps));
    if (rec.status === 'succeeded') ran.violations.push(...(await completedViolations(store, id, tool)));
  }
  return [ran, resumed];
}

/** Counts for the report. */
export const workerToolStats = () => ({ ...stats });
