/** Scheduler leadership: one Redis key, and each replica's own clock never outliving it. */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { Leadership } from '../src/index.js';
import { harness, type Harness } from './helpers.js';

let h: Harness;
before(async () => (h = await harness()));
after(() => h.close());

test('a tick that returns after its lease has run out says this replica does not lead', async () => {
  // A 2 s lease: a first tick answered late on a loaded machine (a 200 ms lease failed there) still
  // leads; the stall below outlasts it.
  const leadership = new Leadership(h.redis, '127.0.0.1:1', 2000);
  assert.equal(await leadership.tick(), true);
  // Redis stalls past the lease while the renewal waits for its answer.
  h.server.pause();
  const renewal = leadership.tick();
  await sleep(2300);
  h.server.resume();
  assert.equal(await renewal, leadership.isLeader(), 'what a tick returns is what isLeader says');
  assert.equal(await renewal, false);
  assert.equal(await leadership.tick(), true, 'the next tick, answered in time, leads again');
});
