/**
 * Slots the scheduler leader lends to the creates (lend.lua, enqueue.lua): a create whose model
 * has nothing waiting dispatches its own task on one, exactly as a round would have (a place, a
 * pick in flight, no offer); with anything waiting, an old leader's loan, no slot left or its
 * tenant at the cap, it is offered to the rounds as before.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, test } from 'node:test';
import { carriedRecord, connectRedis, defineDispatch, lend, TaskStore, type HandOff } from '../src/index.js';
import { CARRIED_RECORD_MAX_CHARS } from '../src/create.js';
import { schedulerKeys, taskKeys } from '../src/keys.js';
import { defaults, harness, newTask, primaries, until, type Harness } from './helpers.js';

let h: Harness;
let leader: ReturnType<typeof connectRedis>;
const handed: HandOff[] = [];
let handOff: (task: HandOff) => Promise<void> = async (task) => void handed.push(task);
before(async () => {
  h = await harness({ handOff: (task) => handOff(task) });
  leader = connectRedis(h.server.url, 'leader');
  defineDispatch(leader);
});
after(async () => {
  leader.disconnect();
  await h.close();
});
/** Every primary's keys gone (a cluster client sends FLUSHALL to one node). */
const flush = async () => {
  for (const node of await primaries(h.redis)) await node.flushall();
};
beforeEach(async () => {
  await flush();
  await h.redis.set(schedulerKeys.leader, 'lead');
  handed.length = 0;
  handOff = async (task) => void handed.push(task);
});

const MAX_RUNNING = 2;
const loan = (model: string, slots: number, token = 'lead') =>
  lend(leader, token, MAX_RUNNING, [[model, slots]]);
const left = async (model: string) => Number((await h.redis.hget(schedulerKeys.loans, `m:${model}`)) ?? 0);
const offered = async (id: string) => (await h.redis.hget(schedulerKeys.offered, id)) !== null;

test('a create on a lent slot dispatches its own task and hands it on; the pick leaves flight', async () => {
  assert.deepEqual(await loan('tiny-chat', 2), [0]);
  const task = await h.store.create(
    newTask({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }),
  );
  await until('the hand-off', async () => (handed.length === 1 ? true : undefined));
  const { record, ...dispatched } = handed[0]!;
  assert.deepEqual(dispatched, {
    id: task.id,
    tenant: 'tenant-a',
    model: 'tiny-chat',
    attempt: 0,
    seq: 1,
    traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
  });
  // The record travels with the job exactly as create.lua wrote it, for the worker to run unread.
  assert.deepEqual(record, await h.redis.hgetall(taskKeys(task.id).task));
  assert.deepEqual(carriedRecord(record, task.id), await h.store.get(task.id));
  assert.equal(await left('tiny-chat'), 1);
  assert.equal(await offered(task.id), false, 'not offered to the rounds');
  assert.equal(await h.redis.zcard(schedulerKeys.ready('tenant-a', 'tiny-chat')), 0);
  assert.equal(await h.redis.sismember(schedulerKeys.models, 'tiny-chat'), 0);
  assert.equal(
    await h.redis.zscore(schedulerKeys.active('tenant-a'), task.id),
    '1',
    'its place, scored by the attempt its claim starts',
  );
  await until('the pick out of flight', async () =>
    (await h.redis.zscore(schedulerKeys.inflight, task.id)) === null ? true : undefined,
  );
  await until('the journal entry dropped', async () =>
    (await h.redis.zscore(schedulerKeys.intake, task.id)) === null ? true : undefined,
  );
  // The next loan tells the leader of the slot taken: a job queued since its last count.
  assert.deepEqual(await loan('tiny-chat', 2), [1]);
  assert.equal(await left('tiny-chat'), 2);
});

test('a hand-off that fails leaves the pick in flight, for the reconciler', async () => {
  await loan('tiny-chat', 1);
  let tried!: () => void;
  const called = new Promise<void>((resolve) => (tried = resolve));
  handOff = () => {
    tried();
    return Promise.reject(new Error('queue down'));
  };
  const task = await h.store.create(newTask());
  await called;
  // The failure's handler has run: what follows the hand-off, had it gone through, would have too.
  await new Promise(setImmediate);
  assert.notEqual(await h.redis.zscore(schedulerKeys.inflight, task.id), null);
  assert.equal(await left('tiny-chat'), 0);
});

test('with a task of its model waiting, a create is offered behind it, loan or not', async () => {
  const waiting = await h.store.create(newTask({ tenant: 'tenant-b' }));
  assert.equal(await offered(waiting.id), true, 'no loan yet: offered');
  await loan('tiny-chat', 4);
  const task = await h.store.create(newTask());
  assert.equal(await offered(task.id), true);
  assert.equal(await left('tiny-chat'), 4);
  // Another model's loan is its own.
  await loan('other', 1);
  const other = await h.store.create(newTask({ model: 'other' }));
  assert.equal(await offered(other.id), false);
  await until("the other model's hand-off", async () => (handed.length === 1 ? true : undefined));
});

test('no slot left, a tenant at the cap lent with the slots, or an old leader: offered', async () => {
  await loan('tiny-chat', 3);
  const first = await h.store.create(newTask());
  const second = await h.store.create(newTask());
  const third = await h.store.create(newTask());
  assert.deepEqual(
    [await offered(first.id), await offered(second.id), await offered(third.id)],
    [false, false, true],
    `the cap is ${MAX_RUNNING}`,
  );
  await flush();
  await h.redis.set(schedulerKeys.leader, 'lead');
  await loan('tiny-chat', 1);
  assert.equal(await offered((await h.store.create(newTask())).id), false);
  assert.equal(await offered((await h.store.create(newTask({ tenant: 'tenant-b' }))).id), true, 'none left');
  await loan('tiny-chat', 5);
  await h.redis.set(schedulerKeys.leader, 'next');
  assert.equal(await offered((await h.store.create(newTask({ tenant: 'tenant-c' }))).id), true, 'old leader');
  assert.equal(await loan('tiny-chat', 1), null, 'the old leader lends no more');
  assert.deepEqual(
    await loan('tiny-chat', 3, 'next'),
    [0],
    "a new leader's first loan finds none of its own",
  );
});

test('a create without a hand-off never takes a slot', async () => {
  await loan('tiny-chat', 2);
  const store = new TaskStore(h.redis, defaults);
  const task = await store.create(newTask());
  assert.equal(await offered(task.id), true);
  assert.equal(await left('tiny-chat'), 2);
});

test("a record travels with its job only when small, and a worker takes only a fresh task's own", async () => {
  await loan('tiny-chat', 2);
  const long = 'x'.repeat(CARRIED_RECORD_MAX_CHARS);
  const big = await h.store.create(newTask({ request: { model: 'tiny-chat', input: long } }));
  const small = await h.store.create(newTask());
  await until('both hand-offs', async () => (handed.length === 2 ? true : undefined));
  const of = (id: string) => handed.find((t) => t.id === id)!;
  assert.equal(of(big.id).record, undefined, 'a large record is read back by the worker');
  const record = of(small.id).record!;
  assert.equal(carriedRecord(record, small.id)?.id, small.id);
  assert.equal(carriedRecord(record, big.id), null, "another task's record");
  assert.equal(carriedRecord({ ...record, attempt: '1' }, small.id), null, 'not a first attempt');
  assert.equal(carriedRecord({ ...record, status: 'running' }, small.id), null, 'not queued');
  assert.equal(carriedRecord({ ...record, seq: 1 }, small.id), null, 'a field not a string');
  assert.equal(carriedRecord(undefined, small.id), null);
  assert.equal(carriedRecord('x', small.id), null);
});
