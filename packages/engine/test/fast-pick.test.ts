/**
 * enqueue.lua's fast path: an offer to a model the leader granted free slots, with no task of any
 * tenant ready for it, is its own pick; under contention (a ready task, no slot left, the tenant
 * at its cap, no grant) it waits in the ready index for dispatch.lua's fair pick.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, test } from 'node:test';
import { schedulerKeys } from '../src/keys.js';
import { defineDispatch, grantSlots, listenForOffers, pickFair, type Pick } from '../src/index.js';
import { flushAll } from '@taskline/testing';
import { harness, newTask, until, type Harness } from './helpers.js';

let h: Harness;
const token = 'token-1 127.0.0.1:1';
const MODEL = 'tiny-chat';
const share = { quantum: 1, maxRunning: 2, weights: new Map<string, number>() };

before(async () => {
  h = await harness();
  defineDispatch(h.redis);
});
after(() => h.close());
beforeEach(async () => {
  await flushAll(h.redis);
  await h.redis.set(schedulerKeys.leader, token);
});

const grant = (slots: number) =>
  grantSlots(h.redis, token, new Map([[MODEL, slots]]), share.maxRunning, 10_000);
const isReady = async (id: string, tenant = 'tenant-a') =>
  (await h.redis.zscore(schedulerKeys.ready(tenant, MODEL), id)) !== null;

test('without a grant an offer waits for dispatch.lua', async () => {
  const task = await h.store.create(newTask());
  assert.ok(await isReady(task.id));
  assert.equal(await h.redis.zscore(schedulerKeys.inflight, task.id), null);
});

test('with a granted slot and no backlog the offer is the pick, and its wake names it', async () => {
  const wakes: { model: string; pick: Pick | null }[] = [];
  const sub = await listenForOffers(h.redis, (model, pick) => wakes.push({ model, pick }));
  try {
    assert.equal(await grant(2), true);
    const task = await h.store.create(newTask());
    assert.equal(await isReady(task.id), false, 'not in the ready index');
    assert.ok(await h.redis.zscore(schedulerKeys.inflight, task.id), 'in flight until its job is queued');
    // Scored by the attempt its claim starts, as dispatch.lua scores a pick.
    assert.equal(await h.redis.zscore(schedulerKeys.active('tenant-a'), task.id), '1');
    assert.equal(await h.redis.hexists(schedulerKeys.offered, task.id), 0);
    assert.equal(await h.redis.zscore(schedulerKeys.intake, task.id), null, 'journal entry dropped');
    assert.equal(await h.redis.hget(schedulerKeys.grants, MODEL), '1', 'one slot taken');
    const wake = await until('the wake', async () => wakes[0]);
    assert.deepEqual(wake, {
      model: MODEL,
      pick: { tenant: 'tenant-a', id: task.id, state: { attempt: 0, seq: 1 } },
    });
    // Nothing is left for a round to pick.
    assert.deepEqual(await pickFair(h.redis, token, MODEL, 10, share), []);
  } finally {
    sub.disconnect();
  }
});

test('under contention offers wait in the ready index and dispatch.lua picks fairly', async () => {
  await grant(1);
  const first = await h.store.create(newTask({ tenant: 'a' }));
  assert.equal(await isReady(first.id, 'a'), false, 'the one granted slot');
  // No slot left: a's next offers wait.
  const backlog = [];
  for (let i = 0; i < 3; i++) backlog.push(await h.store.create(newTask({ tenant: 'a' })));
  for (const t of backlog) assert.ok(await isReady(t.id, 'a'));
  // Slots again, but a backlog: b's offer is not picked ahead of a's turn, it waits its turn.
  await grant(5);
  const b = await h.store.create(newTask({ tenant: 'b' }));
  assert.ok(await isReady(b.id, 'b'), 'a ready task of another tenant: no fast path');
  const picks = await pickFair(h.redis, token, MODEL, 2, share);
  assert.deepEqual(picks?.map((p) => p.tenant).sort(), ['a', 'b'], 'one each: the round is fair');
});

test('a tenant at its running cap is not picked on the fast path', async () => {
  await grant(10);
  const one = await h.store.create(newTask());
  const two = await h.store.create(newTask());
  assert.equal(await isReady(one.id), false);
  assert.equal(await isReady(two.id), false);
  const three = await h.store.create(newTask());
  assert.ok(await isReady(three.id), `at the cap of ${share.maxRunning}: waits`);
});

test('a replica that lost leadership grants nothing', async () => {
  await h.redis.set(schedulerKeys.leader, 'token-2 127.0.0.1:2');
  assert.equal(await grant(3), false);
  assert.equal(await h.redis.exists(schedulerKeys.grants), 0);
  const task = await h.store.create(newTask());
  assert.ok(await isReady(task.id));
});

test('an in-flight index of the wrong type leaves the fast path unwritten: the offer waits ready', async () => {
  await grant(2);
  await h.redis.set(schedulerKeys.inflight, 'not a zset');
  const task = await h.store.create(newTask());
  assert.ok(await isReady(task.id));
  assert.equal(await h.redis.hget(schedulerKeys.grants, MODEL), '2', 'no slot taken');
  assert.equal(await h.redis.zscore(schedulerKeys.active('tenant-a'), task.id), null, 'no place');
});
