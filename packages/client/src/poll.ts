/**
 * How fast a client polls. The server's interval is a floor: every delay is that interval (or the
 * client's own, if larger) times a backoff factor that grows while nothing changes, plus 10-20 %
 * jitter so that many clients started together spread out. Jitter is only ever added, so no delay
 * is shorter than the interval.
 */
export interface PollPolicy {
  /** The floor, in ms (LMSP has no server hint; MCP's `pollIntervalMs` raises it). */
  intervalMs: number;
  /** Growth per unchanged poll (1 = none). */
  backoff: number;
  /** Cap on the backed-off delay, before jitter; never below `intervalMs`. */
  maxIntervalMs: number;
}

export const DEFAULT_POLL: PollPolicy = { intervalMs: 1000, backoff: 1.5, maxIntervalMs: 15_000 };

/**
 * The wait before the next poll. `unchanged` counts polls in a row that saw no change; `random`
 * is in [0, 1).
 */
export function nextPollDelay(
  policy: PollPolicy,
  unchanged: number,
  random: number,
  serverIntervalMs = 0,
): number {
  const floor = Math.max(policy.intervalMs, serverIntervalMs);
  const backedOff = Math.min(
    floor * policy.backoff ** Math.max(0, unchanged),
    Math.max(policy.maxIntervalMs, floor),
  );
  return Math.ceil(backedOff * (1.1 + 0.1 * Math.min(Math.max(random, 0), 1)));
}
