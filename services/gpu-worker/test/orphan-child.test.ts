/**
 * A tool task's child generation ends with its parent: cancelled when no attempt of the parent
 * is left to cancel it (the parent's worker died, and the cancel or the sweep ended the parent).
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { after, before, test } from 'node:test';
import { TOOLS_MODEL } from '@taskline/control';
import { idempotencyKey } from '@taskline/engine/keys';
import { EngineStack, exited, until } from '@taskline/test-support/engine-stack';

let cluster: EngineStack;
before(async () => (cluster = await EngineStack.start()));
after(() => cluster.stop());

/**
 * A `generate` tool task run by a worker that cannot run the child's model, and its child
 * streaming on a second worker (about 160 tokens at 200 ms each: it would run long after the
 * parent ended).
 */
async function parentWithChild() {
  const parentWorker = cluster.startWorker({ TASKLINE_WORKER_MODELS: 'instant' });
  const parent = await cluster.store.create({
    tenant: 't1',
    kind: 'tool',
    model: TOOLS_MODEL,
    onRestart: 'retry',
    request: {
      tool: 'generate',
      arguments: { model: 'tiny-chat', input: 'Write a long poem.', max_output_tokens: 200 },
    },
  });
  const claimed = await cluster.waitFor(parent.id, 'claimed', (t) => t.leaseOwner !== null);
  const childWorker = cluster.startWorker({ TASKLINE_WORKER_MIN_STEP_MS: '200' });
  const hash = createHash('sha256').update(`tool:${parent.id}:0`).digest('hex');
  const childId = await until(
    'the child generation',
    async () => (await cluster.store.redis.hget(idempotencyKey('t1', hash), 'task')) ?? undefined,
  );
  await cluster.waitForTokens(childId, 2);
  parentWorker.kill('SIGKILL');
  await exited(parentWorker);
  return { parent: claimed, childId, childWorker };
}

/** The child ends cancelled, not run to its token limit; its worker is stopped either way. */
async function assertChildCancelled(childId: string, childWorker: ChildProcess) {
  const child = await cluster.waitForEnd(childId, 60_000).finally(async () => {
    childWorker.kill('SIGKILL');
    await exited(childWorker);
  });
  assert.equal(child.status, 'cancelled', `the child ran on: ${JSON.stringify(child.result).slice(0, 200)}`);
}

test('a child generation is cancelled when its parent is cancelled after the parent’s worker was SIGKILLed', async () => {
  const { parent, childId, childWorker } = await parentWithChild();
  assert.equal((await cluster.store.cancel(parent.id, 't1')).outcome, 'cancelling');
  // No attempt acknowledges it: the recovery sweep ends the parent once its lease lapsed.
  assert.equal((await cluster.waitForEnd(parent.id, 60_000)).status, 'cancelled');
  await assertChildCancelled(childId, childWorker);
});

test('a child generation is cancelled when its parent is cancelled while queued after a restart', async () => {
  const { parent, childId, childWorker } = await parentWithChild();
  // The scheduler stopped: the restarted parent stays queued, no worker takes it before the cancel.
  const schedulers = [...cluster.schedulers.values()];
  for (const s of schedulers) s.kill('SIGSTOP');
  try {
    assert.equal((await cluster.store.restart(parent.id, parent.attempt, 'worker_lost'))?.status, 'queued');
    assert.equal((await cluster.store.cancel(parent.id, 't1')).outcome, 'cancelled');
  } finally {
    for (const s of schedulers) s.kill('SIGCONT');
  }
  await assertChildCancelled(childId, childWorker);
});
