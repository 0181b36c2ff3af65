/**
 * Tool tasks under chaos: `generate` calls (one child generation each) and `batch_generate` calls
 * that ask for a confirmation, a number of them never answered (more than every worker's tool
 * slots together), while workers are drained past their deadline (SIGTERM) or paused past their
 * lease (SIGSTOP, then SIGCONT) besides being SIGKILLed. What it checks:
 * - every tool task that was not left waiting ends within the bound, whatever waits unanswered;
 * - a completed tool task carries its child generations' text, and no child is cancelled unless
 *   its parent was (a drained or paused attempt must leave its child to the next attempt);
 * - an unanswered task waits parked (no lease, no worker slot), and a cancel ends it at once.
 */
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { isTerminal, type TaskStore } from '@taskline/engine';
import { idempotencyKey } from '@taskline/engine/keys';
import { mcpOfA, TENANTS } from './client.js';
import type { Invariant } from './observed.js';
import type { Service } from '@taskline/testing';

/** Env for every process: workers generate on the chaos model and ask above a small estimate. */
export const TOOL_CHAOS_ENV = {
  TASKLINE_MODELS: 'instant',
  TASKLINE_BATCH_CONFIRM_ABOVE_TOKENS: '8',
};

/** Unanswered confirmations left waiting: more than the 2 workers' 4 tool slots each. */
const UNANSWERED = 10;
const TERMINAL_BOUND_MS = Number(process.env.TASKLINE_CHAOS_TERMINAL_BOUND_MS ?? 90_000);
/** Past the chaos run's worker lease (1500 ms): the paused worker's tasks are recovered meanwhile. */
const PAUSE_MS = 2500;

interface ToolTask {
  id: string;
  tool: 'generate' | 'batch_generate';
  prompts: number;
  /** Left waiting for its confirmation on purpose. */
  unanswered: boolean;
}
const tasks = new Map<string, ToolTask>();
const stats = { created: 0, asked: 0, answered: 0, unanswered: 0, refused: 0, failed: [] as string[] };

const statusOf = async (lb: string, taskId: string) =>
  ((await mcpOfA(lb, 'tasks/get', { taskId }))?.message?.result as { status?: string } | undefined)?.status;

/** One tool call of the load, followed until it ends (or, left unanswered, until it asks). */
export async function toolTask(lb: string, until: number): Promise<void> {
  const batch = Math.random() < 0.5;
  const leave = batch && stats.unanswered < UNANSWERED;
  if (leave) stats.unanswered++;
  const args = batch
    ? { model: 'instant', prompts: ['chaos one', 'chaos two'], max_output_tokens: 4 }
    : { model: 'instant', input: 'chaos', max_output_tokens: 4 };
  let id: string | null = null;
  for (let i = 0; i < 10 && !id && Date.now() < until + 5000; i++) {
    const created = await mcpOfA(lb, 'tools/call', {
      name: batch ? 'batch_generate' : 'generate',
      arguments: args,
    });
    const result = created?.message?.result as { resultType?: string; taskId?: string } | undefined;
    if (result?.resultType === 'task' && result.taskId) id = result.taskId;
    else await sleep(500);
  }
  if (!id) {
    stats.refused++;
    if (leave) stats.unanswered--;
    return;
  }
  stats.created++;
  tasks.set(id, {
    id,
    tool: batch ? 'batch_generate' : 'generate',
    prompts: batch ? 2 : 1,
    unanswered: leave,
  });
  const deadline = until + TERMINAL_BOUND_MS;
  let answered = false;
  while (Date.now() < deadline) {
    const status = await statusOf(lb, id);
    if (status && ['completed', 'failed', 'cancelled'].includes(status)) return;
    if (status === 'input_required' && !answered) {
      stats.asked++;
      if (leave) return;
      const up = await mcpOfA(lb, 'tasks/update', {
        taskId: id,
        inputResponses: { confirm: { action: 'accept', content: { proceed: true } } },
      });
      if (up?.message?.result) {
        answered = true;
        stats.answered++;
      }
    }
    await sleep(300);
  }
}

/** A worker fault other than SIGKILL: `done` resolves once the worker may be restarted (or runs again). */
export interface WorkerFault {
  action: string;
  done: Promise<void>;
  /** Whether the process exited and must be started again. */
  restart: boolean;
}

const KINDS = [
  'api SIGKILL',
  'scheduler SIGKILL',
  'worker SIGKILL',
  'worker drain',
  'worker pause',
  'tool-worker SIGKILL',
  'tool-worker drain',
] as const;
/** The kinds that are no SIGKILL (workerFault injects them). */
export type WorkerFaultKind = 'worker drain' | 'worker pause' | 'tool-worker drain';
const injected = new Map<string, number>(KINDS.map((k) => [k, 0]));

/**
 * Picks the next fault among the processes that are up: the kind injected least so far, so that a
 * short run still covers every kind; a random process of that kind. Null: nothing to pick.
 */
export function chooseFault(
  up: Service[],
  roles: { apis: Service[]; workers: Service[]; toolWorkers: Service[] },
): { target: Service; kind: (typeof KINDS)[number] } | null {
  const role = (s: Service) =>
    roles.apis.includes(s)
      ? 'api'
      : roles.workers.includes(s)
        ? 'worker'
        : roles.toolWorkers.includes(s)
          ? 'tool-worker'
          : 'scheduler';
  const possible = KINDS.filter((k) => up.some((s) => k.startsWith(role(s))));
  if (possible.length === 0) return null;
  const fewest = Math.min(...possible.map((k) => injected.get(k)!));
  const kinds = possible.filter((k) => injected.get(k) === fewest);
  const kind = kinds[Math.floor(Math.random() * kinds.length)]!;
  const targets = up.filter((s) => kind.startsWith(role(s)));
  injected.set(kind, fewest + 1);
  return { target: targets[Math.floor(Math.random() * targets.length)]!, kind };
}

/** Drains a worker or tool worker (SIGTERM: its deadline passes mid-task) or pauses a worker past its lease. */
export function workerFault(worker: Service, kind: WorkerFaultKind): WorkerFault {
  const child = worker.child!;
  if (kind !== 'worker pause') {
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGTERM');
    return { action: 'SIGTERM (drain past its deadline)', done: exited, restart: true };
  }
  child.kill('SIGSTOP');
  const resumed = sleep(PAUSE_MS).then(() => void child.kill('SIGCONT'));
  return { action: `SIGSTOP ${PAUSE_MS} ms (lease lost), SIGCONT`, done: resumed, restart: false };
}

/** The kinds not injected yet. */
export const uninjected = () => KINDS.filter((k) => injected.get(k) === 0);

/** Fault kinds every run must inject at least once, besides the Redis kill and restart. */
export const REQUIRED_FAULTS = KINDS;

/** The n-th child generation of a tool task (created under (task, n)). */
async function child(store: TaskStore, taskId: string, n: number) {
  const hash = createHash('sha256').update(`tool:${taskId}:${n}`).digest('hex');
  const id = await store.redis.hget(idempotencyKey(TENANTS.a, hash), 'task');
  return id ? store.get(id) : null;
}

function childText(result: unknown): string | undefined {
  return (result as { output?: { content?: { text?: string }[] }[] } | null)?.output?.[0]?.content?.[0]?.text;
}

/** The invariants of the tool load (see the file's header). */
export async function checkToolTasks(store: TaskStore, lb: string): Promise<Invariant[]> {
  const ends: Invariant = {
    name: `tool tasks end within the bound while ${UNANSWERED} unanswered ones wait`,
    checked: 0,
    violations: [],
  };
  const children: Invariant = {
    name: 'completed tool tasks carry their children’s text; no child cancelled unless its parent was',
    checked: 0,
    violations: [],
  };
  const parked: Invariant = {
    name: 'unanswered tool tasks wait parked (no lease, no slot); a cancel ends them at once',
    checked: 0,
    violations: [],
  };
  const deadline = Date.now() + TERMINAL_BOUND_MS;
  for (const t of tasks.values()) {
    if (t.unanswered) continue;
    ends.checked++;
    let rec = await store.get(t.id);
    while (rec && !isTerminal(rec.status) && Date.now() < deadline) {
      await sleep(500);
      rec = await store.get(t.id);
    }
    if (!rec || !isTerminal(rec.status)) {
      ends.violations.push(`${t.id} (${t.tool}) ${rec ? `still ${rec.status}` : 'missing'}`);
      continue;
    }
    for (let n = 0; n < t.prompts; n++) {
      const c = await child(store, t.id, n);
      if (!c) continue;
      children.checked++;
      if (c.status === 'cancelled' && rec.status !== 'cancelled')
        children.violations.push(`${t.id}: child ${c.id} cancelled, parent ${rec.status}`);
    }
    const result = rec.result as { content?: { text?: string }[]; isError?: boolean } | null;
    // Not a broken promise by itself (a tool fails on a Redis outage mid-step, or reports a failed
    // generation as its isError result): reported, counted.
    if (rec.status !== 'succeeded' || result?.isError) {
      const why = rec.error?.code ?? (result?.isError ? `isError ${result.content?.[0]?.text ?? ''}` : '');
      stats.failed.push(`${t.id} (${t.tool}) ${rec.status}: ${why}`);
      continue;
    }
    const texts = [];
    for (let n = 0; n < t.prompts; n++) texts.push(childText((await child(store, t.id, n))?.result));
    const expected = t.tool === 'generate' ? texts[0] : texts.map((x, i) => `${i + 1}. ${x}`).join('\n');
    const got = result?.content?.[0]?.text;
    if (!got || texts.some((x) => !x) || got !== expected)
      children.violations.push(
        `${t.id}: text ${JSON.stringify(got)} is not its children's ${JSON.stringify(expected)}`,
      );
  }
  for (const t of tasks.values()) {
    if (!t.unanswered) continue;
    let rec = await store.get(t.id);
    while (rec && rec.status !== 'input_required' && !isTerminal(rec.status) && Date.now() < deadline) {
      await sleep(500);
      rec = await store.get(t.id);
    }
    parked.checked++;
    if (!rec || rec.status !== 'input_required' || !rec.parked || rec.leaseOwner !== null) {
      parked.violations.push(
        `${t.id}: ${rec ? `${rec.status}, parked ${rec.parked}, lease ${rec.leaseOwner}` : 'missing'}`,
      );
      continue;
    }
    await mcpOfA(lb, 'tasks/cancel', { taskId: t.id });
    const after = await store.get(t.id);
    if (after?.status !== 'cancelled')
      parked.violations.push(`${t.id}: ${after?.status} right after its cancel`);
  }
  return [ends, children, parked];
}

/** Counts for the report. */
export const toolStats = () => ({ ...stats, faults: Object.fromEntries(injected) });
