import { connectControl, type ControlClient } from '../src/index.js';

/** A worker with one model `m` of `slots` free slots that reconnects every 50 ms, as the tests need. */
export function testWorker(addresses: string[], slots = 1): ControlClient {
  return connectControl({
    addresses,
    workerId: 'w1',
    slots: () => [{ model: 'm', slots, free: slots }],
    draining: () => false,
    onDrain: () => undefined,
    retryMs: 50,
  });
}
