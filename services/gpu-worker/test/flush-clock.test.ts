import assert from 'node:assert/strict';
import { afterEach, mock, test } from 'node:test';
import { FlushClock } from '../src/response.js';

afterEach(() => mock.timers.reset());

test('the flush clock fires everything scheduled before a tick on that one tick, and not cancelled ones', () => {
  // Mocked timers: the test moves the clock itself, so a slow machine cannot split a tick.
  mock.timers.enable({ apis: ['setTimeout'] });
  const clock = new FlushClock(20);
  const fired: string[] = [];
  clock.schedule(() => fired.push('a'));
  mock.timers.tick(5);
  clock.schedule(() => fired.push('b'));
  const cancel = clock.schedule(() => fired.push('c'));
  cancel();
  mock.timers.tick(14);
  assert.equal(fired.length, 0, 'nothing before the tick');
  // The tick a started (at 20 ms) fires b too: b has no timer of its own (it would be due at 25).
  mock.timers.tick(1);
  assert.deepEqual(fired, ['a', 'b']);
  // The clock runs only while something waits, and starts again with the next.
  mock.timers.tick(100);
  clock.schedule(() => fired.push('d'));
  mock.timers.tick(19);
  assert.deepEqual(fired, ['a', 'b']);
  mock.timers.tick(1);
  assert.deepEqual(fired, ['a', 'b', 'd']);
});
