/** The leader's retention sweep bounds and expires the operator index that creates only add to. */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { operatorKeys } from '@taskline/engine/keys';
import { Cluster, until } from '../../gpu-worker/test/helpers.js';

let cluster: Cluster | undefined;
after(() => cluster?.stop());

test("the leader bounds a tenant's operator index and sets it to expire, as creates go on", async () => {
  cluster = await Cluster.start({
    env: { TASKLINE_RETENTION_SWEEP_MS: '200', TASKLINE_OPERATOR_INDEX_MAX: '100' },
  });
  const redis = cluster.store.redis;
  const key = operatorKeys.tasks('t1');
  for (let round = 0; round < 2; round++) {
    // Each round's tasks are newer than the last round's: the bound keeps this round's alone.
    const ids = new Set<string>();
    for (let i = 0; i < 103; i++) ids.add((await cluster.create({ input: 'x' }, { model: 'instant' })).id);
    await until(
      'the index bounded to its hundred newest',
      async () => {
        const members = await redis.zrange(key, 0, -1);
        return members.length === 100 && members.every((m) => ids.has(m)) ? true : undefined;
      },
      10_000,
    );
    assert.ok((await redis.pttl(key)) > 0, 'expires');
  }
});
