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
 * Calls `fire(i)` at `ratePerS` for `seconds`, open loop: each call starts at its scheduled time
 * whatever the previous ones do, and gets that scheduled time, so slow answers cannot hide
 * behind a slowed-down sender (coordinated omission).
 */
export async function openLoop(
  ratePerS: number,
  seconds: number,
  fire: (i: number, scheduledAt: number) => Promise<void>,
): Promise<void> {
  const total = Math.round(ratePerS * seconds);
  const interval = 1000 / ratePerS;
  const start = nowMs() + 5;
  const pending: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const at = start + i * interval;
    const wait = at - nowMs();
    if (wait > 1) await sleep(wait);
    pending.push(fire(i, at));
  }
  await Promise.all(pending);
}
