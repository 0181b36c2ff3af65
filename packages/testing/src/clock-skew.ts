/**
 * Test-only preload (see `skewedClock`): this process's `Date.now` runs `TL_TEST_CLOCK_SKEW_MS`
 * off the machine's, as a host whose clock drifted would. No service reads the variable.
 */
const skew = Number(process.env.TL_TEST_CLOCK_SKEW_MS ?? 0);
const machine = Date.now;
Date.now = () => machine() + skew;
