import { TEST_CONTROL_TOKEN } from '@taskline/testing';
import { connectControl, type ControlClient, type ControlSecurity } from '../src/index.js';

/** The test schedulers' and workers' credential: the test token over plaintext. */
export const TEST_SECURITY: ControlSecurity = { tokens: [TEST_CONTROL_TOKEN], tls: null };

/** A worker with one model `m` of `slots` free slots that reconnects every 50 ms, as the tests need. */
export function testWorker(
  addresses: string[],
  slots = 1,
  options: { workerId?: string; security?: ControlSecurity; onRefused?: (message: string) => void } = {},
): ControlClient {
  return connectControl({
    addresses,
    workerId: options.workerId ?? 'w1',
    security: options.security ?? TEST_SECURITY,
    onRefused:
      options.onRefused ??
      ((message) => {
        throw new Error(`unexpected refusal: ${message}`);
      }),
    slots: () => [{ model: 'm', slots, free: slots }],
    draining: () => false,
    onDrain: () => undefined,
    retryMs: 50,
  });
}
