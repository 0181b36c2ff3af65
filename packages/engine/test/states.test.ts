import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  CANCEL_OUTCOME,
  isTerminal,
  recoveryTarget,
  sourcesOf,
  TASK_STATUSES,
  TERMINAL_STATUSES,
  TRANSITIONS,
} from '../src/states.js';

test('terminal states never change', () => {
  for (const s of TERMINAL_STATUSES) assert.deepEqual(TRANSITIONS[s], []);
});

test('the LMSP 7.2 transitions are all legal', () => {
  const lmsp: [string, string][] = [
    ['queued', 'loading'],
    ['queued', 'cancelled'],
    ['queued', 'failed'],
    ['loading', 'running'],
    ['loading', 'cancelling'],
    ['loading', 'failed'],
    ['running', 'succeeded'],
    ['running', 'failed'],
    ['running', 'cancelling'],
    ['cancelling', 'cancelled'],
  ];
  for (const [from, to] of lmsp)
    assert.ok(sourcesOf(to as never).includes(from as never), `${from} -> ${to}`);
  assert.ok(!sourcesOf('succeeded').includes('queued'), 'a queued task cannot succeed without running');
  assert.deepEqual(sourcesOf('cancelled'), ['queued', 'cancelling']);
});

test('cancel outcomes follow LMSP 7.3', () => {
  assert.equal(CANCEL_OUTCOME.queued, 'cancelled');
  assert.equal(CANCEL_OUTCOME.running, 'cancelling');
  assert.equal(CANCEL_OUTCOME.cancelled, 'noop');
  assert.equal(CANCEL_OUTCOME.succeeded, 'not_cancelable');
  for (const s of TASK_STATUSES) {
    const outcome = CANCEL_OUTCOME[s];
    if (outcome !== 'noop' && outcome !== 'not_cancelable')
      assert.ok(sourcesOf(outcome).includes(s), 'sourcesOf(outcome).includes(s)');
  }
});

test('restart policies follow LMSP 7.5', () => {
  assert.equal(recoveryTarget('running', 'fail'), 'failed');
  assert.equal(recoveryTarget('running', 'retry'), 'queued');
  assert.equal(recoveryTarget('loading', 'resume'), 'queued');
  assert.equal(recoveryTarget('cancelling', 'retry'), 'cancelled');
  assert.equal(recoveryTarget('queued', 'fail'), null);
  for (const s of TERMINAL_STATUSES) assert.equal(recoveryTarget(s, 'retry'), null);
  assert.ok(
    isTerminal('failed') && !isTerminal('cancelling'),
    "isTerminal('failed') && !isTerminal('cancelling')",
  );
});
