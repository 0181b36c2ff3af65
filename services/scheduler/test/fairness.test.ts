import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Redis } from 'ioredis';
import { childrenQueue, offeredState, schedulerKeys } from '@taskline/engine/keys';
import { flushAll, startRedis, type RedisServer } from '@taskline/testing';
import { connectRedis, defineDispatch, pickFair } from '@taskline/engine';

let server: RedisServer;
let redis: Redis;
const token = 'token-1 127.0.0.1:1';
const share = { quantum: 1, maxRunning: 100_000, weights: new Map<string, number>() };
const MODEL = 'm';

before(async () => {
  server = await startRedis();
  redis = connectRedis(server.url, 'fairness-test');
  defineDispatch(redis);
});
after(async () => {
  redis.disconnect();
  await server.stop();
});

/** What enqueue writes for `count` ready tasks of `tenant` on `model`. */
async function fill(tenant: string, count: number, from = 0, model = MODEL): Promise<void> {
  const pipe = redis.pipeline();
  for (let i = 0; i < count; i++)
    pipe.zadd(schedulerKeys.ready(tenant, model), from + i, `task_${tenant}_${model}_${i}`);
  pipe.sadd(schedulerKeys.tenants(model), tenant);
  pipe.sadd(schedulerKeys.models, model);
  await pipe.exec();
}

test('a tenant with 10,000 queued tasks delays another tenant by at most one round', async () => {
  await flushAll(redis);
  await redis.set(schedulerKeys.leader, token);
  await fill('a', 10_000);
  // B's single task arrives last, after A's whole backlog.
  await fill('b', 1, 20_000);
  // Drain A for a while with one slot per call: B must come out within one round (2 tenants = 2 picks).
  const picked: string[] = [];
  for (let i = 0; i < 2; i++) {
    const picks = await pickFair(redis, token, MODEL, 1, share);
    assert.ok(picks, 'picks');
    picked.push(...picks.map((p) => p.tenant));
  }
  assert.ok(picked.includes('b'), `b was not dispatched in the first round: ${picked.join(',')}`);
  // With budget for a whole round at once, both tenants are served in the same call.
  await fill('b', 1, 30_000);
  const round = await pickFair(redis, token, MODEL, 2, share);
  assert.deepEqual(round?.map((p) => p.tenant).sort(), ['a', 'b']);
  assert.equal(await redis.zcard(schedulerKeys.ready('a', MODEL)), 10_000 - 2);
});

test('picks go in queue order within a tenant and are recorded in flight', async () => {
  await flushAll(redis);
  await redis.set(schedulerKeys.leader, token);
  await fill('a', 5);
  const picks = await pickFair(redis, token, MODEL, 3, share);
  assert.deepEqual(
    picks?.map((p) => p.id),
    ['task_a_m_0', 'task_a_m_1', 'task_a_m_2'],
  );
  assert.equal(await redis.zcard(schedulerKeys.inflight), 3);
  assert.equal(await redis.zcard(schedulerKeys.active('a')), 3);
});

test('weights give a tenant more per round and caps bound its running tasks', async () => {
  await flushAll(redis);
  await redis.set(schedulerKeys.leader, token);
  await fill('a', 50);
  await fill('b', 50);
  const weighted = await pickFair(redis, token, MODEL, 4, { ...share, weights: new Map([['a', 3]]) });
  assert.deepEqual(weighted?.map((p) => p.tenant).sort(), ['a', 'a', 'a', 'b']);
  const capped = await pickFair(redis, token, MODEL, 100, { ...share, maxRunning: 5 });
  // Each tenant already runs some: a 3, b 1; the cap of 5 leaves 2 and 4.
  assert.equal(capped?.filter((p) => p.tenant === 'a').length, 2);
  assert.equal(capped?.filter((p) => p.tenant === 'b').length, 4);
  assert.deepEqual(await pickFair(redis, token, MODEL, 100, { ...share, maxRunning: 5 }), []);
});

test("a round's picks come in turn order, A's turn, then B's, then A's again", async () => {
  await flushAll(redis);
  await redis.set(schedulerKeys.leader, token);
  await fill('a', 10);
  await fill('b', 1, 100);
  // Six slots, A's weight 2 and a cap of 3: A's turn, B's, then A's next up to its cap.
  const round = await pickFair(redis, token, MODEL, 6, {
    ...share,
    maxRunning: 3,
    weights: new Map([['a', 2]]),
  });
  assert.deepEqual(
    round?.map((p) => p.id),
    ['task_a_m_0', 'task_a_m_1', 'task_b_m_0', 'task_a_m_2'],
  );
});

test('a pick hands on the queued state its task was offered in, once', async () => {
  await flushAll(redis);
  await redis.set(schedulerKeys.leader, token);
  await fill('a', 2);
  await redis.hset(schedulerKeys.offered, 'task_a_m_0', offeredState({ attempt: 2, seq: 9 }));
  const picks = await pickFair(redis, token, MODEL, 2, share);
  assert.deepEqual(picks, [
    { tenant: 'a', id: 'task_a_m_0', state: { attempt: 2, seq: 9 } },
    // Offered without a state (an older api): the scheduler reads the task instead.
    { tenant: 'a', id: 'task_a_m_1', state: null },
  ]);
  assert.equal(await redis.exists(schedulerKeys.offered), 0);
});

test('a replica that lost leadership cannot dispatch', async () => {
  await flushAll(redis);
  await redis.set(schedulerKeys.leader, 'someone-else 127.0.0.1:2');
  await fill('a', 3);
  assert.equal(await pickFair(redis, token, MODEL, 3, share), null);
  assert.equal(await redis.zcard(schedulerKeys.ready('a', MODEL)), 3);
});

test('tenants with nothing ready leave the tenant set', async () => {
  await flushAll(redis);
  await redis.set(schedulerKeys.leader, token);
  await fill('a', 1);
  await pickFair(redis, token, MODEL, 5, share);
  await pickFair(redis, token, MODEL, 5, share);
  assert.equal(await redis.sismember(schedulerKeys.tenants(MODEL), 'a'), 0);
  assert.equal(await redis.sismember(schedulerKeys.models, MODEL), 0, 'and the model leaves the model set');
});

test('the model stays in the model set while a tenant has tasks ready, and leaves it in the round that takes the last', async () => {
  await flushAll(redis);
  await redis.set(schedulerKeys.leader, token);
  await fill('a', 1);
  await fill('b', 2, 10);
  // Listed with nothing ready (an index emptied by a cancel): it leaves the set when visited.
  await redis.sadd(schedulerKeys.tenants(MODEL), 'c');
  // a's one task and b's first, the budget spent before c's turn: a leaves, the model stays.
  assert.equal((await pickFair(redis, token, MODEL, 2, share))?.length, 2);
  assert.deepEqual((await redis.smembers(schedulerKeys.tenants(MODEL))).sort(), ['b', 'c']);
  assert.equal(await redis.sismember(schedulerKeys.models, MODEL), 1);
  assert.equal((await pickFair(redis, token, MODEL, 5, share))?.length, 1);
  assert.equal(await redis.exists(schedulerKeys.tenants(MODEL)), 0);
  assert.equal(await redis.sismember(schedulerKeys.models, MODEL), 0, 'in the round that emptied it');
});

test('a turn cut short by the budget goes on in the next call, so weights hold one slot at a time', async () => {
  await flushAll(redis);
  await redis.set(schedulerKeys.leader, token);
  await fill('a', 50);
  await fill('b', 50);
  const order: string[] = [];
  for (let i = 0; i < 12; i++) {
    const picks = await pickFair(redis, token, MODEL, 1, { ...share, weights: new Map([['a', 3]]) });
    order.push(...(picks ?? []).map((p) => p.tenant));
  }
  assert.equal(order.join(''), 'aaabaaabaaab');
});

test('each model is dispatched from its own tasks: a model with no free slot holds back no other', async () => {
  await flushAll(redis);
  await redis.set(schedulerKeys.leader, token);
  // Tenant a's oldest tasks are for model x, which has no free worker in this round.
  await fill('a', 5, 0, 'x');
  await fill('a', 5, 100, 'y');
  await fill('b', 5, 200, 'y');
  const picks = await pickFair(redis, token, 'y', 4, share);
  assert.deepEqual(picks?.map((p) => p.id).sort(), ['task_a_y_0', 'task_a_y_1', 'task_b_y_0', 'task_b_y_1']);
  assert.equal(await redis.zcard(schedulerKeys.ready('a', 'x')), 5, 'x untouched');
  // Each model keeps its own turn: x starts with a, whatever y did.
  const x = await pickFair(redis, token, 'x', 1, share);
  assert.deepEqual(
    x?.map((p) => p.id),
    ['task_a_x_0'],
  );
});

test('a key of the wrong type refuses the round before anything is written', async () => {
  await flushAll(redis);
  await redis.set(schedulerKeys.leader, token);
  await fill('a', 2);
  await fill('b', 2, 10);
  // Tenant b's running set is not a zset: the round would fail half-way, after a's picks.
  await redis.set(schedulerKeys.active('b'), 'x');
  const before = await redis.zrange(schedulerKeys.ready('a', MODEL), 0, -1);
  await assert.rejects(pickFair(redis, token, MODEL, 4, share), /wrong type/);
  assert.deepEqual(await redis.zrange(schedulerKeys.ready('a', MODEL), 0, -1), before);
  assert.equal(await redis.exists(schedulerKeys.inflight), 0);
  assert.equal(await redis.exists(schedulerKeys.active('a')), 0);
});

test('each key a round reads or writes refuses the round when of the wrong type, before anything is written', async () => {
  // The round checks some keys by the reads it makes anyway (tenants, round-robin state, each
  // tenant's counts), the rest by TYPE: each must refuse, whatever the key's wrong type.
  const cases: [string, (key: string) => Promise<unknown>][] = [
    [schedulerKeys.tenants(MODEL), (k) => redis.set(k, 'x')],
    [schedulerKeys.rr(MODEL), (k) => redis.sadd(k, 'x')],
    [schedulerKeys.inflight, (k) => redis.sadd(k, 'x')],
    [schedulerKeys.models, (k) => redis.zadd(k, 1, 'x')],
    [schedulerKeys.offered, (k) => redis.set(k, 'x')],
    [schedulerKeys.ready('b', MODEL), (k) => redis.hset(k, 'x', '1')],
    [schedulerKeys.active('a'), (k) => redis.sadd(k, 'x')],
  ];
  for (const [key, spoil] of cases) {
    await flushAll(redis);
    await redis.set(schedulerKeys.leader, token);
    await fill('a', 2);
    await fill('b', 2, 10);
    await redis.del(key);
    await spoil(key);
    const before = await redis.zrange(schedulerKeys.ready('a', MODEL), 0, -1);
    await assert.rejects(
      pickFair(redis, token, MODEL, 4, share),
      new RegExp(`${escape(key)} has the wrong type`),
    );
    if (key !== schedulerKeys.ready('a', MODEL))
      assert.deepEqual(await redis.zrange(schedulerKeys.ready('a', MODEL), 0, -1), before, key);
    if (key !== schedulerKeys.inflight) assert.equal(await redis.exists(schedulerKeys.inflight), 0, key);
    if (key !== schedulerKeys.active('a'))
      assert.equal(await redis.exists(schedulerKeys.active('a')), 0, key);
    if (key !== schedulerKeys.rr(MODEL)) assert.equal(await redis.exists(schedulerKeys.rr(MODEL)), 0, key);
  }
});

const escape = (text: string) => text.replace(/[{}.*+?^$()|[\]\\]/g, '\\$&');

test('the first dispatch on a connection that auto-pipelines other traffic in the same tick breaks nothing', async () => {
  await flushAll(redis);
  await redis.set(schedulerKeys.leader, token);
  await fill('a', 1);
  // As the scheduler connects (auto-pipelining on), tl_dispatch defined before its first round.
  const busy = connectRedis(server.url, 'fairness-busy');
  defineDispatch(busy);
  try {
    await busy.ping();
    // A heartbeat or gauge read already waiting in this tick's pipeline when the first round runs.
    const other = busy.get('unrelated');
    const picks = await pickFair(busy, token, MODEL, 1, share);
    assert.equal(await other, null);
    assert.deepEqual(
      picks?.map((p) => p.id),
      ['task_a_m_0'],
    );
  } finally {
    busy.disconnect();
  }
});

test('a round is one round trip: the script reads the model tenants itself, weights and children included', async () => {
  await flushAll(redis);
  await redis.set(schedulerKeys.leader, token);
  await fill('a', 4);
  await fill('b', 4, 10);
  await fill(childrenQueue('b'), 4, 20);
  const weighted = { ...share, weights: new Map([['b', 2]]) };
  await pickFair(redis, token, MODEL, 1, weighted); // the script is loaded now
  const sent: string[] = [];
  const send = redis.sendCommand.bind(redis);
  redis.sendCommand = ((command: { name: string }) => {
    sent.push(command.name);
    return send(command as never);
  }) as typeof redis.sendCommand;
  try {
    const picks = await pickFair(redis, token, MODEL, 8, weighted);
    assert.deepEqual(sent, ['evalsha']);
    // After a's turn (the first call), b and its children by weight 2, then a by 1.
    assert.deepEqual(
      picks?.map((p) => p.tenant),
      ['b', 'b', 'b/children', 'b/children', 'a', 'b', 'b', 'b/children'],
    );
  } finally {
    redis.sendCommand = send;
  }
});

test('a round of more picks than one write takes hands each on with its tenant and offered state', async () => {
  await flushAll(redis);
  await redis.set(schedulerKeys.leader, token);
  await fill('a', 700);
  await fill('b', 700, 1000);
  await redis.hset(schedulerKeys.offered, 'task_a_m_600', '0:1', 'task_b_m_3', '2:7');
  const picks = await pickFair(redis, token, MODEL, 1300, share);
  assert.equal(picks?.length, 1300);
  // Round robin, one each: a, b, a, b, ... until the budget ends.
  assert.ok(
    picks!.every((p, i) => p.tenant === (i % 2 === 0 ? 'a' : 'b') && p.id.startsWith(`task_${p.tenant}_`)),
    "picks!.every((p, i) => p.tenant === (i % 2 === 0 ? 'a' : 'b') && p.id.startsWith(`task_${p.tenant}_`))",
  );
  assert.deepEqual(picks!.find((p) => p.id === 'task_a_m_600')?.state, { attempt: 0, seq: 1 });
  assert.deepEqual(picks!.find((p) => p.id === 'task_b_m_3')?.state, { attempt: 2, seq: 7 });
  assert.equal(picks!.filter((p) => p.state).length, 2);
  assert.equal(await redis.zcard(schedulerKeys.inflight), 1300);
  assert.equal(await redis.zcard(schedulerKeys.active('a')), 650);
  assert.equal(await redis.zcard(schedulerKeys.active('b')), 650);
  assert.equal(await redis.hlen(schedulerKeys.offered), 0);
  assert.equal(await redis.zcard(schedulerKeys.ready('a', MODEL)), 50);
});
