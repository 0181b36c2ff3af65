/** Latency summaries: nearest-rank percentiles over every sample (no histogram buckets). */
export interface Summary {
  count: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil(q * sorted.length) - 1;
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank))]!;
}

export function summarize(samples: readonly number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  const mean = sorted.reduce((a, b) => a + b, 0) / (sorted.length || 1);
  return {
    count: sorted.length,
    mean: round(mean),
    p50: round(percentile(sorted, 0.5)),
    p90: round(percentile(sorted, 0.9)),
    p99: round(percentile(sorted, 0.99)),
    max: round(sorted[sorted.length - 1] ?? NaN),
  };
}

/** Three significant decimals are more than these machines can resolve. */
export function round(n: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

/** Epoch milliseconds with sub-millisecond resolution, comparable across processes on one host. */
export const nowMs = () => performance.timeOrigin + performance.now();

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Calls `fire(i, sentAt)` at `ratePerS` for `seconds`, open loop: each call starts on schedule
 * whatever the previous ones do, so slow answers never hold back later requests (no coordinated
 * omission). Latencies count from `sentAt`, the moment of the call: timers have millisecond
 * granularity, so a send can leave a fraction of a millisecond off schedule, and counting from the
 * schedule would add that to every sample (more than a whole `queue.add` takes). Returns how late
 * the sends left against the schedule, which shows the sender kept up.
 */
export async function openLoop(
  ratePerS: number,
  seconds: number,
  fire: (i: number, sentAt: number) => Promise<void>,
): Promise<Summary> {
  const total = Math.round(ratePerS * seconds);
  const interval = 1000 / ratePerS;
  const start = nowMs() + 5;
  const pending: Promise<void>[] = [];
  const lags: number[] = [];
  for (let i = 0; i < total; i++) {
    const at = start + i * interval;
    const wait = at - nowMs();
    if (wait > 0) await sleep(wait);
    const sentAt = nowMs();
    lags.push(Math.max(0, sentAt - at));
    const sent = fire(i, sentAt);
    // A failure is raised by the Promise.all below once every send has left, not as an
    // unhandled rejection that ends the process (and orphans its helper processes) mid-schedule.
    sent.catch(() => undefined);
    pending.push(sent);
  }
  await Promise.all(pending);
  return summarize(lags);
}
