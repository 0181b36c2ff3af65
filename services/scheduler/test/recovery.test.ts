/** The leader's recovery sweep goes on past a task it cannot recover: the leases after it lapse into their policy. */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { schedulerKeys, taskKeys } from '@taskline/engine/keys';
import { EngineStack } from '@taskline/test-support/engine-stack';

let cluster: EngineStack | undefined;
after(() => cluster?.stop());

test('a lapsed lease the leader cannot recover does not keep it from recovering the others', async () => {
  cluster = await EngineStack.start({ env: { TASKLINE_RECOVERY_INTERVAL_MS: '100' } });
  const {
    store,
    store: { redis },
  } = cluster;
  // Claimed by a worker that died at once; the first one's event log holds something else.
  const stuck = await cluster.create({ input: 'x' });
  await store.claim(stuck.id, 'dead', 1);
  await redis.del(taskKeys(stuck.id).events);
  await redis.set(taskKeys(stuck.id).events, 'not a stream');
  await new Promise((r) => setTimeout(r, 5));
  const lost = await cluster.create({ input: 'x' });
  await store.claim(lost.id, 'dead', 1);

  const ended = await cluster.waitForEnd(lost.id, 10_000);
  assert.equal(ended.error?.code, 'server_restarted');
  assert.equal((await store.get(stuck.id))?.status, 'loading', 'untouched');
  assert.ok(await redis.zscore(schedulerKeys.leases, stuck.id), 'kept for the next round');
});
