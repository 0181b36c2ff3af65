/**
 * Leases are stamped and judged by Redis's clock: a worker whose host clock runs behind the
 * scheduler's keeps its healthy attempts. Real scheduler and gpu-worker processes, the worker's
 * clock skewed (skewedClock).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { skewedClock } from '@taskline/testing';
import { EngineStack, LONG } from '@taskline/test-support/engine-stack';

let cluster: EngineStack;
before(async () => {
  // A one-second lease, swept every 100 ms: a skew of 5 s is five leases.
  cluster = await EngineStack.start({
    env: { TASKLINE_LEASE_MS: '1000', TASKLINE_RECOVERY_INTERVAL_MS: '100' },
  });
  // 100 ms a token: the attempt outlives several leases and renewals.
  cluster.startWorker({ TASKLINE_WORKER_MIN_STEP_MS: '100', ...skewedClock(-5000) });
});
after(() => cluster.stop());

test('a healthy attempt of a worker whose clock is 5 s behind the scheduler is not restarted', async () => {
  const task = await cluster.create({ ...LONG, max_output_tokens: 30 }, { onRestart: 'fail' });
  const ended = await cluster.waitForEnd(task.id, 120_000);
  assert.equal(ended.error?.code, undefined, 'not failed as a lost worker');
  assert.equal(ended.status, 'succeeded');
  assert.equal(ended.attempt, 1, 'one attempt, never restarted');
});
