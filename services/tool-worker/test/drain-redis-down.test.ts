/**
 * A tool worker SIGTERMed while its Redis is gone still exits: its drain is bounded by the
 * deadline and a grace, so a rollout or a scale-in never waits on a Redis that will not answer.
 * Real Redis (killed), a real scheduler and the real tool-worker process.
 */
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { EngineStack } from '@taskline/test-support/engine-stack';
import { toolWorker } from './helpers.js';

let cluster: EngineStack;
before(async () => (cluster = await EngineStack.start()));
after(() => cluster.stop());

it('SIGTERM with Redis down: the worker exits 0 after its deadline and grace, not never', async () => {
  const worker = await toolWorker(cluster, 'steps.ts');
  cluster.store.redis.on('error', () => undefined); // the test's own connection: Redis is killed on purpose
  await cluster.stack.redis.kill();
  worker.child!.kill('SIGTERM');
  // A bound that catches a hang: the drain deadline (200 ms) and the 5 s grace, with room for a slow host.
  const outcome = await Promise.race([
    worker.exited,
    new Promise((resolve) => setTimeout(resolve, 30_000, 'still running 30 s after SIGTERM')),
  ]);
  assert.equal(outcome, 0);
});
