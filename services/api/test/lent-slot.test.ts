/**
 * The api dispatches a task itself on a slot the scheduler leader lent: a create whose model has
 * nothing waiting queues its own BullMQ job, and no dispatch round runs for it (docs/engine.md,
 * "The flow of one task", step 3). Fails if the api stops handing its tasks over.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { schedulerKeys } from '@taskline/engine/keys';
import { EngineStack, until } from '@taskline/test-support/engine-stack';
import { KEY_A, spawnApi, type ApiProcess } from './helpers.js';

let cluster: EngineStack | undefined;
let api: ApiProcess | undefined;
after(async () => {
  api?.child.kill('SIGTERM');
  if (api) await api.exited;
  await cluster?.stop();
});

test('a create on an idle model is dispatched by the api on a lent slot, not by a round', async () => {
  // No interval rounds within the test: only wake-ups and freed slots start one.
  cluster = await EngineStack.start({ env: { TASKLINE_DISPATCH_INTERVAL_MS: '600000' } });
  cluster.startWorker({ TASKLINE_WORKER_MODELS: 'instant', TASKLINE_WORKER_SLOTS: '2' });
  api = await spawnApi(cluster.redis.url, { TASKLINE_MODELS: 'tiny-chat,instant' });
  const { base } = api;
  const redis = cluster.store.redis;
  await until(
    "the worker's slots lent",
    async () => (Number(await redis.hget(schedulerKeys.loans, 'm:instant')) > 0 ? true : undefined),
    20_000,
  );
  for (let i = 0; i < 3; i++) {
    const res = await fetch(`${base}/lmsp/v1/tasks`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${KEY_A}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ type: 'response', input: { model: 'instant', input: 'x' }, on_restart: 'fail' }),
    }).catch((err: unknown) => {
      // What the api process said last, and whether it is still running, beside the client's error.
      const cause = err instanceof Error ? String(err.cause ?? err) : String(err);
      const last = api!.logs.slice(-5).map((l) => JSON.stringify(l));
      throw new Error(
        `create ${i} failed (${cause}); api exit code ${api!.child.exitCode}: ${last.join(' ')}`,
      );
    });
    const text = await res.text();
    assert.equal(res.status, 202, text);
    const { id } = JSON.parse(text) as { id: string };
    assert.equal((await cluster.waitForEnd(id, 10_000)).status, 'succeeded');
    // The next create finds a slot lent again once this one's is free.
    await until('a slot lent', async () =>
      Number(await redis.hget(schedulerKeys.loans, 'm:instant')) > 0 ? true : undefined,
    );
  }
  // dispatch.lua writes the model's round-robin cursor whenever it picks a task of it.
  assert.equal(await redis.exists(schedulerKeys.rr('instant')), 0, 'no round picked a task');
  assert.equal(await redis.exists(schedulerKeys.offered), 0, 'no task was offered to the rounds');
});
