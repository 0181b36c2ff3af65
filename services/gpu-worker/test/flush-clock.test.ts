import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FlushClock } from '../src/response.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('the flush clock fires everything scheduled before a tick on that one tick, and not cancelled ones', async () => {
  const clock = new FlushClock(20);
  const fired: string[] = [];
  let sameTurn = false;
  clock.schedule(() => {
    fired.push('a');
    // Still in the turn that fired a: b fired in it too, not on a timer of its own.
    queueMicrotask(() => (sameTurn = fired.includes('b')));
  });
  await sleep(5);
  clock.schedule(() => fired.push('b'));
  const cancel = clock.schedule(() => fired.push('c'));
  cancel();
  await sleep(40);
  assert.deepEqual(fired, ['a', 'b']);
  assert.ok(sameTurn, 'a and b fired on the same tick');
  // The clock runs only while something waits, and starts again with the next.
  clock.schedule(() => fired.push('d'));
  await sleep(40);
  assert.deepEqual(fired, ['a', 'b', 'd']);
});
