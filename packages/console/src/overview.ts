// The console's overview snapshot: queues, workers, throughput and SLO burn rates.
import { readyBacklog, type OperatorView, type TaskStore } from '@taskline/engine';
import { burnRates } from './slo.js';

/** What the overview reads besides the engine. */
export interface OverviewDeps {
  store: TaskStore;
  /** Served model ids: each gets a row even while idle. */
  models: string[];
  prometheusUrl: string;
  /** TASKLINE_TRACE_URL_TEMPLATE: a task's trace link, `{trace_id}` in it; empty for none. */
  traceUrlTemplate?: string;
}

/**
 * The overview: per model queue depth, oldest wait and worker slots; workers and leader;
 * throughput per minute; SLO burn rates. Read from the scheduler's ready index (one pipeline in
 * its slot), the leader's worker snapshot, an hour of per-minute counters and one Prometheus
 * query: the same reads however many tasks exist, and never a SCAN.
 */
export async function readOverview(deps: OverviewDeps, view: OperatorView) {
  const now = Date.now();
  const [backlog, workers, leader, throughput, slo] = await Promise.all([
    readyBacklog(deps.store.redis),
    view.workers(),
    view.leader(),
    view.throughput(15),
    burnRates(deps.prometheusUrl),
  ]);
  const models = new Map<string, { queued: number; oldest: number | null; slots: number; free: number }>();
  const row = (m: string) => {
    let r = models.get(m);
    if (!r) models.set(m, (r = { queued: 0, oldest: null, slots: 0, free: 0 }));
    return r;
  };
  for (const m of deps.models) row(m);
  for (const b of backlog) {
    const r = row(b.model);
    r.queued += b.depth;
    r.oldest = r.oldest === null ? b.oldestAt : Math.min(r.oldest, b.oldestAt);
  }
  for (const w of workers?.workers ?? [])
    for (const s of w.models) {
      const r = row(s.model);
      r.slots += s.slots;
      r.free += s.free;
    }
  return {
    at: now,
    models: [...models].map(([model, r]) => ({
      model,
      queued: r.queued,
      oldest_wait_s: r.oldest === null ? null : Math.max(0, (now - r.oldest) / 1000),
      running: r.slots - r.free,
      slots_free: r.free,
      slots_busy: r.slots - r.free,
    })),
    workers: workers?.workers.length ?? 0,
    leader,
    throughput,
    slo,
  };
}
