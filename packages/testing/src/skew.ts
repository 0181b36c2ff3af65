/** Service processes whose clock is off the machine's: the env that gives them one (test only). */

/**
 * The env of a service process whose `Date.now` runs `ms` off the machine's clock (negative:
 * behind), as on a host whose clock drifted: a preload of the test package shifts it before the
 * service starts. Timers and Redis's own clock are untouched; the service is not told.
 */
export function skewedClock(ms: number): Record<string, string> {
  const preload = new URL('./clock-skew.js', import.meta.url).href;
  return { NODE_OPTIONS: `--import ${preload}`, TL_TEST_CLOCK_SKEW_MS: String(ms) };
}
