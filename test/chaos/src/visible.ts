/**
 * The chaos run's share of LMSP 1.0 sections 7.2 and 7.5 on restarts: rolling worker restarts
 * (SIGTERM with a short drain deadline) among the faults, a polling client, and the invariants
 * that every task's visible status, in its events and in polled reads, only moves along 7.2's
 * table, and that the deltas of every succeeded task join to its final text (a reader honouring
 * `response.restarted` assembles exactly it).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import {
  isTerminal,
  RESTART_EVENT_TYPE,
  visibleStepViolation,
  type TaskStatus,
  type TaskStore,
} from '@taskline/engine';
import { KEYS, send } from './client.js';
import type { Service } from '@taskline/testing';

/** The workers' drain deadline: short, so a rolling restart cuts generations mid-way. */
export const ROLLING_DRAIN_MS = '300';

const polled = new Map<string, TaskStatus[]>();
let rollingRestarts = 0;

/**
 * Stops a fault's target: a worker is half the time drained as a rolling update does it (SIGTERM:
 * running tasks get ROLLING_DRAIN_MS, then their on_restart policy), else SIGKILLed. Returns the
 * action for the fault timeline.
 */
export async function stopForFault(target: Service, isWorker: boolean): Promise<string> {
  const child = target.child;
  if (!isWorker || Math.random() < 0.5 || !child || child.exitCode !== null || child.signalCode !== null) {
    await target.kill();
    return 'SIGKILL';
  }
  rollingRestarts++;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  // A drain that never ends is a crash after all (and shows in the report as one).
  const drained = await Promise.race([exited.then(() => true), sleep(15_000).then(() => false)]);
  if (drained) return 'SIGTERM (rolling restart)';
  await target.kill();
  return 'SIGTERM, not drained in 15 s: SIGKILL';
}

/** A client polling `GET /lmsp/v1/tasks/{id}` of unfinished tasks, recording each status change. */
export async function pollStatuses(lb: string, ids: () => string[], until: number): Promise<void> {
  while (Date.now() < until) {
    const open = ids().filter((id) => !isTerminal(polled.get(id)?.at(-1) ?? 'queued'));
    for (const id of open.slice(-20)) {
      const r = await send(lb, 'GET', `/lmsp/v1/tasks/${id}`, {
        headers: { authorization: `Bearer ${KEYS.a}` },
      }).catch(() => null);
      const status = (r?.status === 200 ? (r.body as { status?: TaskStatus }).status : undefined) ?? null;
      if (!status) continue;
      const seen = polled.get(id) ?? [];
      if (seen.at(-1) !== status) seen.push(status);
      polled.set(id, seen);
    }
    await sleep(50);
  }
}

/** The invariant of the deltas (minimums.ts requires it by this name). */
export const DELTAS_INVARIANT = 'the deltas of every succeeded task join to its final text';

/**
 * For every task: its events' `task_status` sequence follows LMSP 7.2's table (MCP's
 * `input_required` included), and so do its polled statuses (which may skip states, never go
 * back). For every succeeded LMSP response task, its deltas join to the final text: a `retry`
 * task's after its last `response.restarted` (what a reader honouring it assembles, docs/lmsp.md),
 * a `resume` or `fail` task's all of them in order (resume continues after its snapshot, fail never
 * runs twice), and neither ever writes `response.restarted`.
 */
export async function visibleInvariants(
  store: TaskStore,
  tasks: { id: string; via: string; onRestart: string }[],
) {
  const visible = {
    name: 'visible status only moves along the LMSP 7.2 table',
    checked: 0,
    violations: [] as string[],
  };
  const text = {
    name: `${DELTAS_INVARIANT} (retry: after the last response.restarted)`,
    checked: 0,
    violations: [] as string[],
  };
  const perPolicy: Record<string, { succeeded: number; restarted: number }> = {};
  for (const { id, via, onRestart } of tasks) {
    const { events } = await store.events(id, 0);
    const parsed = events.map((e): { type: string } & Record<string, unknown> => ({
      type: e.type,
      ...(JSON.parse(e.data) as Record<string, unknown>),
    }));
    const statuses = parsed
      .map((e) => e.task_status as TaskStatus | undefined)
      .filter((s) => s !== undefined);
    visible.checked++;
    const inEvents = visibleStepViolation(statuses);
    if (inEvents) visible.violations.push(`${id}: events step ${inEvents} (${statuses.join(' ')})`);
    const reads = polled.get(id);
    if (reads) {
      const inReads = visibleStepViolation(reads, true);
      if (inReads) visible.violations.push(`${id}: polled reads step ${inReads} (${reads.join(' ')})`);
    }
    const rec = await store.get(id);
    if (via !== 'lmsp' || rec?.status !== 'succeeded') continue;
    const final = (rec.result as { output?: { content?: { text?: string }[] }[] } | null)?.output?.[0]
      ?.content?.[0]?.text;
    const lastRestart = parsed.findLastIndex((e) => e.type === RESTART_EVENT_TYPE);
    const stats = (perPolicy[onRestart] ??= { succeeded: 0, restarted: 0 });
    stats.succeeded++;
    if (rec.restarts > 0) stats.restarted++;
    if (lastRestart >= 0 && onRestart !== 'retry')
      text.violations.push(`${id}: on_restart ${onRestart} wrote ${RESTART_EVENT_TYPE}`);
    const assembled = parsed
      .slice(onRestart === 'retry' ? lastRestart + 1 : 0)
      .filter((e) => e.type === 'response.output_text.delta')
      .map((e) => e.delta as string)
      .join('');
    text.checked++;
    if (final === undefined) text.violations.push(`${id}: succeeded without an output text`);
    else if (assembled !== final)
      text.violations.push(
        `${id}: on_restart ${onRestart}, ${rec.restarts} restarts: deltas ${JSON.stringify(assembled.slice(0, 60))} (${assembled.length} characters), final ${JSON.stringify(final.slice(0, 60))} (${final.length})`,
      );
  }
  return {
    invariants: [
      Object.assign(visible, { polled_tasks: polled.size }),
      Object.assign(text, { rolling_restarts: rollingRestarts, per_policy: perPolicy }),
    ],
  };
}
