import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { serverTime } from '../src/redis.js';
import { scriptSource } from '../src/scripts.js';
import { harness, primaries, type Harness } from './helpers.js';

// The scripts on their own, through plain EVAL: the header comments are their contract.
let h: Harness;
before(async () => (h = await harness()));
after(() => h.close());

const keys = [
  'tl:{t}:task',
  'tl:{t}:events',
  'tl:{t}:ev',
  'tl:{t}:inputs',
  'tl:{t}:tokens',
  'tl:{t}:created',
];
const evalScript = (name: Parameters<typeof scriptSource>[0], n: number, ...args: (string | number)[]) =>
  h.redis.eval(scriptSource(name), n, ...keys.slice(0, n), ...args) as Promise<unknown[]>;

test('create refuses an id that exists', async () => {
  assert.deepEqual(await evalScript('create', 6, 1, '0', 0, 1, 'tenant', 'a', 'response.created', '{}'), [
    'ok',
    1,
  ]);
  assert.deepEqual(await evalScript('create', 6, 2, '0', 0, 1, 'tenant', 'b', 'response.created', '{}'), [
    'exists',
  ]);
  assert.equal(await h.redis.hget(keys[0]!, 'tenant'), 'a');
  assert.equal(await h.redis.exists(keys[5]!), 0, 'no created mark without a lifetime for it');
});

test('create with a created mark refuses the id once its task is gone, before writing anything', async () => {
  const taskKeys = ['task', 'events', 'ev', 'inputs', 'tokens', 'created'].map((k) => `tl:{v}:${k}`);
  const [task, events, , , , created] = taskKeys;
  // A drawn id ('1'), with a mark kept a minute.
  const create = (tenant: string) =>
    h.redis.eval(
      scriptSource('create'),
      6,
      ...taskKeys,
      1,
      '1',
      60_000,
      1,
      'tenant',
      tenant,
      'response.created',
      '{}',
    );
  assert.deepEqual(await create('a'), ['ok', 1]);
  assert.ok((await h.redis.pttl(created!)) > 0, 'the mark expires on its own');
  assert.deepEqual(await create('b'), ['exists'], 'the task is there: a retry gets it');
  // The task expires (retention) and its mark stays.
  await h.redis.del(task!, events!);
  assert.deepEqual(await create('c'), ['gone']);
  assert.equal(await h.redis.exists(task!, events!), 0);
});

test('create of an id drawn for it clears nothing under the id, but refuses a task there', async () => {
  const [task, , , inputs] = ['tl:{u}:task', 'tl:{u}:events', 'tl:{u}:ev', 'tl:{u}:inputs', 'tl:{u}:tokens'];
  const create = (fresh: string, tenant: string) =>
    h.redis.eval(
      scriptSource('create'),
      6,
      'tl:{u}:task',
      'tl:{u}:events',
      'tl:{u}:ev',
      inputs!,
      'tl:{u}:tokens',
      'tl:{u}:created',
      1,
      fresh,
      0,
      1,
      'tenant',
      tenant,
      'response.created',
      '{}',
    );
  await h.redis.hset(inputs!, 'q:left', '{}');
  assert.deepEqual(await create('1', 'a'), ['ok', 1]);
  // No DEL ran: what a vanished task left is still there.
  assert.equal(await h.redis.hget(inputs!, 'q:left'), '{}');
  assert.deepEqual(await create('0', 'b'), ['exists']);
  assert.deepEqual(await create('1', 'c'), ['exists']);
  assert.equal(await h.redis.hget(task!, 'tenant'), 'a');
});

test('idempotency_begin re-points a done record only while it still names the task known gone', async () => {
  const record = 'tl:idem:{t}:k';
  // KEYS: record; ARGV: now, candidate, fingerprint, pending hold, TTL, the id known gone.
  const begin = (candidate: string, gone: string) =>
    h.redis.eval(scriptSource('idempotency_begin'), 1, record, 1000, candidate, 'fp', 30_000, 60, gone);
  await h.redis.hset(record, 'task', 'task_old', 'fingerprint', 'fp', 'state', 'done', 'since', 1);
  assert.deepEqual(await begin('task_a', ''), ['done', 'task_old'], 'nothing known gone: the task is named');
  assert.deepEqual(await begin('task_a', 'task_other'), ['done', 'task_old'], 'another id known gone');
  assert.equal(await h.redis.hget(record, 'task'), 'task_old');
  assert.deepEqual(await begin('task_a', 'task_old'), ['new', 'task_a']);
  assert.deepEqual(await h.redis.hmget(record, 'task', 'state', 'since'), ['task_a', 'pending', '1000']);
  assert.ok((await h.redis.ttl(record)) > 0, '(await h.redis.ttl(record)) > 0');
  // A second retry that saw the old id gone too: the record names the first one's id now.
  assert.deepEqual(await begin('task_b', 'task_old'), ['pending', 'task_a']);
});

test("transition checks the allowed sources, the fence and the lease, by Redis's clock", async () => {
  const move = (to: string, from: string, fence: string, lease: string, terminal = 0) =>
    evalScript('transition', 5, 10, to, from, fence, lease, 1000, 1000, terminal, 0, 0, 'e', '{}');
  assert.deepEqual(await move('running', 'loading', '', ''), ['illegal', 'queued']);
  // A lease a minute from now by Redis's clock, whatever the caller's `now` (ARGV[1], here 10).
  const leaseUntil = (await serverTime(h.redis, keys[0]!)) + 60_000;
  await h.redis.hset(
    keys[0]!,
    'status',
    'running',
    'attempt',
    2,
    'lease_until',
    leaseUntil,
    'kind',
    'tool',
    'created_at',
    5,
  );
  assert.deepEqual(await move('failed', 'running', '1', ''), ['stale', 'running', '2']);
  assert.deepEqual(await move('failed', 'running', '2', '0'), ['lease_held', 'running'], 'live now');
  assert.deepEqual(
    await move('failed', 'running', '2', '120000', 1),
    ['ok', 'failed', 2, 'tool', '5'],
    'lapsed in 2 min',
  );
  assert.deepEqual(await move('running', 'failed', '', ''), ['terminal', 'failed']);
  assert.ok((await h.redis.pttl(keys[0]!)) > 0, '(await h.redis.pttl(keys[0]!)) > 0');
  assert.deepEqual(await h.redis.hmget(keys[0]!, 'lease_until', 'ended_at'), [null, '10']);
});

test("renew answers the status and the deadline it stamped by Redis's clock, and refuses other attempts", async () => {
  await h.redis.del(keys[0]!);
  await h.redis.hset(keys[0]!, 'status', 'cancelling', 'attempt', 3);
  const before = await serverTime(h.redis, keys[0]!);
  const [ok, status, deadline] = await evalScript('renew', 1, 3, 500);
  const after = await serverTime(h.redis, keys[0]!);
  assert.deepEqual([ok, status], ['ok', 'cancelling']);
  assert.ok(Number(deadline) >= before + 500 && Number(deadline) <= after + 500, `${deadline}`);
  assert.equal(await h.redis.hget(keys[0]!, 'lease_until'), String(deadline));
  assert.deepEqual(await evalScript('renew', 1, 2, 500), ['stale', 'cancelling']);
});

test('a fenced write to a task back in the queue is stale, whatever its attempt', async () => {
  await h.redis.del(keys[0]!);
  await h.redis.hset(keys[0]!, 'status', 'queued', 'attempt', 4);
  const reply = await evalScript(
    'transition',
    5,
    10,
    'cancelled',
    'queued',
    '4',
    '',
    1000,
    1000,
    1,
    0,
    0,
    'e',
    '{}',
  );
  assert.deepEqual(reply, ['stale', 'queued', '4']);
});

test('transition can drop the token snapshot in the same step', async () => {
  await h.redis.del(keys[0]!, keys[1]!);
  await h.redis.hset(keys[0]!, 'status', 'running', 'attempt', 1);
  await h.redis.set(keys[4]!, '1,2,3,');
  await evalScript('transition', 5, 10, 'queued', 'running', '1', '', 1000, 1000, 0, 1, 0, 'e', '{}');
  assert.equal(await h.redis.exists(keys[4]!), 0);
});

test('lease_unindex keeps an entry that a claim re-indexed meanwhile', async () => {
  const source = scriptSource('lease_unindex');
  await h.redis.zadd('tl:{sched}:leases', 100, 'a', 900, 'b');
  assert.equal(await h.redis.eval(source, 1, 'tl:{sched}:leases', 'a', 500), 1);
  assert.equal(await h.redis.eval(source, 1, 'tl:{sched}:leases', 'b', 500), 0);
  assert.deepEqual(await h.redis.zrange('tl:{sched}:leases', 0, -1), ['b']);
});

test('lease_unindex puts back the score it is given, on the entry it would have removed only', async () => {
  const source = scriptSource('lease_unindex');
  await h.redis.zadd('tl:{sched}:parked', 500, 'a', 900, 'b');
  assert.equal(await h.redis.eval(source, 1, 'tl:{sched}:parked', 'a', 500, 300), 1);
  assert.equal(await h.redis.eval(source, 1, 'tl:{sched}:parked', 'b', 500, 300), 0);
  assert.deepEqual(await h.redis.zrange('tl:{sched}:parked', 0, -1, 'WITHSCORES'), ['a', '300', 'b', '900']);
});

test('park_unindex removes a task’s running place and lease entry only while the place is the parked attempt’s', async () => {
  const source = scriptSource('park_unindex');
  const [leases, running] = ['tl:{sched}:leases', 'tl:{sched}:active:park'];
  await h.redis.zadd(leases, 100, 'a', 100, 'b', 100, 'c');
  // Places scored by the attempt dispatched: `b`'s is a newer attempt's, `c` holds none.
  await h.redis.zadd(running, 3, 'a', 4, 'b');
  assert.equal(await h.redis.eval(source, 2, leases, running, 'a', 3), 2);
  assert.equal(await h.redis.eval(source, 2, leases, running, 'b', 3), 0);
  assert.equal(await h.redis.eval(source, 2, leases, running, 'c', 3), 0);
  assert.deepEqual(await h.redis.zrange(leases, 0, -1), ['b', 'c']);
  assert.deepEqual(await h.redis.zrange(running, 0, -1), ['b']);
});

test('claim_unindex takes back a refused claim’s lease entry unless a later claim may hold it', async () => {
  const source = scriptSource('claim_unindex');
  const [leases, running] = ['tl:{sched}:leases:claim', 'tl:{sched}:active:claim'];
  // Each refused claim wrote 500. `b` was re-indexed later; `c` has a place above the attempt its
  // refusal saw (2): a dispatch since, whose job may have claimed it; `d` is held (lease 450).
  await h.redis.zadd(leases, 500, 'a', 900, 'b', 500, 'c', 500, 'd');
  await h.redis.zadd(running, 2, 'a', 3, 'c', 2, 'd');
  const undo = (id: string, lease: string) => h.redis.eval(source, 2, leases, running, id, 500, 2, lease);
  assert.equal(await undo('a', ''), 1);
  assert.equal(await undo('b', ''), 0);
  assert.equal(await undo('c', ''), 0);
  assert.equal(await undo('d', '450'), 1);
  assert.deepEqual(await h.redis.zrange(leases, 0, -1, 'WITHSCORES'), ['d', '450', 'c', '500', 'b', '900']);
  assert.deepEqual(await h.redis.zrange(running, 0, -1), ['a', 'd', 'c'], 'no place moves');
});

test('place_unindex removes a running place only while its score is the one read', async () => {
  const source = scriptSource('place_unindex');
  const running = 'tl:{sched}:active:place';
  // `b` was dispatched again since the read (a newer attempt's score); `c` holds no place.
  await h.redis.zadd(running, 3, 'a', 4, 'b');
  assert.equal(await h.redis.eval(source, 1, running, 'a', '3'), 1);
  assert.equal(await h.redis.eval(source, 1, running, 'b', '3'), 0);
  assert.equal(await h.redis.eval(source, 1, running, 'c', '3'), 0);
  assert.deepEqual(await h.redis.zrange(running, 0, -1, 'WITHSCORES'), ['b', '4']);
});

test('enqueue offers a task once in its latest state, wakes the scheduler, and drops the journal entry only when told', async () => {
  const source = scriptSource('enqueue');
  const k = ['tl:{sched}:ready:m:t', 'tl:{sched}:active:t', 'tl:{sched}:tenants:m', 'tl:{sched}:models'];
  const intake = 'tl:{sched}:intake';
  const offered = 'tl:{sched}:offered';
  await h.redis.zadd(intake, 1, 'a', 1, 'b');
  // A place of an earlier attempt than the state offered (at most ARGV[8]).
  await h.redis.zadd(k[1]!, 0, 'a');
  // ARGV: id, created at, journal flag, queued state offered, highest place score to drop.
  const offer = (id: string, score: number, journal: string, state: string, placed: number) =>
    h.redis.eval(
      source,
      6,
      ...k,
      intake,
      offered,
      id,
      score,
      't',
      'm',
      'tl:{sched}:wake',
      journal,
      state,
      placed,
    );
  const sub = h.redis.duplicate();
  await sub.subscribe('tl:{sched}:wake');
  const woken = new Promise((r) => sub.once('message', (_c, model) => r(model)));
  try {
    assert.equal(await offer('a', 10, '0', '0:1', 0), 1);
    assert.equal(await woken, 'm', 'the wake-up names the model');
    assert.equal(await h.redis.hget(offered, 'a'), '0:1');
    // A second offer keeps the first score but names the state offered now; this one drops the journal entry.
    await offer('a', 99, '1', '1:7', 1);
    assert.equal(await h.redis.hget(offered, 'a'), '1:7');
    // An offer of an older state (read before the task was queued again) leaves the newer one.
    assert.equal(await offer('a', 99, '0', '1:6', 1), 0);
    assert.equal(await offer('a', 99, '0', '0:9', 1), 0);
    assert.equal(await h.redis.hget(offered, 'a'), '1:7');
    assert.deepEqual(await h.redis.zrange(k[0]!, 0, -1, 'WITHSCORES'), ['a', '10']);
    assert.equal(await h.redis.zcard(k[1]!), 0, 'a waiting task is out of the running set');
    assert.deepEqual(await h.redis.smembers(k[2]!), ['t']);
    assert.deepEqual(await h.redis.smembers(k[3]!), ['m']);
    assert.deepEqual(await h.redis.zrange(intake, 0, -1), ['b']);
    // `b` was dispatched in the state read (1:3: a place scored 2, the attempt its claim starts):
    // its job may have claimed it, so it keeps its place and is not offered; the journal entry goes.
    await h.redis.zadd(k[1]!, 2, 'b');
    assert.equal(await offer('b', 5, '1', '1:3', 1), 0);
    assert.deepEqual(await h.redis.zrange(k[1]!, 0, -1, 'WITHSCORES'), ['b', '2']);
    assert.deepEqual(await h.redis.zrange(k[0]!, 0, -1), ['a']);
    assert.equal(await h.redis.hget(offered, 'b'), null);
    assert.equal(await h.redis.zcard(intake), 0);
    // Its job lost (the caller found none), an offer that may drop that place takes it back.
    await offer('b', 5, '1', '1:3', 2);
    assert.equal(await h.redis.zcard(k[1]!), 0);
    assert.deepEqual(await h.redis.zrange(k[0]!, 0, -1), ['b', 'a']);
  } finally {
    sub.disconnect();
  }
});

test('enqueue writes nothing when one of its keys has the wrong type', async () => {
  const k = ['tl:{sched}:ready:m:u', 'tl:{sched}:active:u', 'tl:{sched}:tenants:m2', 'tl:{sched}:models2'];
  const offered = 'tl:{sched}:offered2';
  await h.redis.set(offered, 'not a hash');
  const reply = await h.redis.eval(
    scriptSource('enqueue'),
    6,
    ...k,
    'tl:{sched}:intake',
    offered,
    'c',
    10,
    'u',
    'm',
    'tl:{sched}:wake',
    '1',
    '0:1',
    0,
  );
  assert.deepEqual(reply, ['corrupt', `${offered} is a string, not a hash`]);
  for (const key of k) assert.equal(await h.redis.exists(key), 0, `${key} untouched`);
});

test('enqueue writes nothing when its ready index, its first write, has the wrong type', async () => {
  const [ready, ...rest] = [
    'tl:{sched}:ready:m3:u',
    'tl:{sched}:active:u3',
    'tl:{sched}:tenants:m3',
    'tl:{sched}:models3',
  ];
  await h.redis.set(ready!, 'not a zset');
  const reply = await h.redis.eval(
    scriptSource('enqueue'),
    6,
    ready!,
    ...rest,
    'tl:{sched}:intake',
    'tl:{sched}:offered3',
    'c',
    10,
    'u',
    'm3',
    'tl:{sched}:wake',
    '1',
    '0:1',
    0,
  );
  assert.deepEqual(reply, ['corrupt', `${ready} is a string, not a zset`]);
  for (const key of [...rest, 'tl:{sched}:offered3'])
    assert.equal(await h.redis.exists(key), 0, `${key} untouched`);
});

test('enqueue refuses each other key of the wrong type, found by the reads it makes anyway, and writes nothing', async () => {
  const k = {
    ready: 'tl:{sched}:ready:m5:u',
    active: 'tl:{sched}:active:u5',
    tenants: 'tl:{sched}:tenants:m5',
    models: 'tl:{sched}:models5',
    intake: 'tl:{sched}:intake5',
    offered: 'tl:{sched}:offered5',
  };
  const offer = (journal: string) =>
    h.redis.eval(
      scriptSource('enqueue'),
      6,
      ...Object.values(k),
      'c',
      10,
      'u',
      'm5',
      'tl:{sched}:wake',
      journal,
      '0:1',
      0,
    );
  const cases: [keyof typeof k, string, (key: string) => Promise<unknown>][] = [
    ['active', 'set', (key) => h.redis.sadd(key, 'c')],
    ['tenants', 'string', (key) => h.redis.set(key, 'x')],
    // A sorted set where a set belongs: SINTERCARD takes neither for the other.
    ['models', 'zset', (key) => h.redis.zadd(key, 1, 'm5')],
    ['intake', 'hash', (key) => h.redis.hset(key, 'c', '1')],
  ];
  for (const [name, type, spoil] of cases) {
    await h.redis.del(...Object.values(k));
    await spoil(k[name]);
    const want = name === 'tenants' || name === 'models' ? 'set' : 'zset';
    assert.deepEqual(await offer('1'), ['corrupt', `${k[name]} is a ${type}, not a ${want}`]);
    for (const [other, key] of Object.entries(k))
      if (other !== name) assert.equal(await h.redis.exists(key), 0, `${key} untouched (${name} spoilt)`);
  }
  // An offer that leaves the journal alone does not read it, so its type is no bar.
  assert.equal(await offer('0'), 1);
  assert.deepEqual(await h.redis.hgetall(k.intake), { c: '1' });
});

test('enqueue on a Redis out of memory fails with OOM (a 503 upstream), not as a corrupt key', async () => {
  // Every primary, on a cluster (test:cluster): the {sched} slot's is one of them.
  const nodes = await primaries(h.redis);
  const maxmemory = async (value: string) =>
    Promise.all(nodes.map((n) => n.config('SET', 'maxmemory', value)));
  await maxmemory('1');
  try {
    await assert.rejects(
      h.redis.eval(
        scriptSource('enqueue'),
        6,
        'tl:{sched}:ready:m4:u',
        'tl:{sched}:active:u4',
        'tl:{sched}:tenants:m4',
        'tl:{sched}:models4',
        'tl:{sched}:intake',
        'tl:{sched}:offered4',
        'c',
        10,
        'u',
        'm4',
        'tl:{sched}:wake',
        '1',
        '0:1',
        0,
      ),
      /^ReplyError: OOM/,
    );
  } finally {
    await maxmemory('0');
  }
  assert.equal(await h.redis.exists('tl:{sched}:ready:m4:u'), 0);
});

test("lease_index scores deadlines by Redis's clock: NX leaves an entry there, GT never moves one back", async () => {
  const source = scriptSource('lease_index');
  const index = 'tl:{sched}:leases:stamped';
  const write = (lease: number, flag: string, ...ids: string[]) =>
    h.redis.eval(source, 1, index, lease, flag, ...ids) as Promise<[number, number]>;
  const before = await serverTime(h.redis, index);
  const [added, deadline] = await write(5000, 'NX', 'a', 'b');
  const after = await serverTime(h.redis, index);
  assert.equal(added, 2);
  assert.ok(deadline >= before + 5000 && deadline <= after + 5000, `${deadline}`);
  assert.equal((await write(60_000, 'NX', 'a'))[0], 0);
  assert.equal(Number(await h.redis.zscore(index, 'a')), deadline, 'NX: the entry there stays');
  await write(0, 'GT', 'b');
  assert.equal(Number(await h.redis.zscore(index, 'b')), deadline, 'GT: never moved back');
  const [, later] = await write(60_000, '', 'b');
  assert.equal(Number(await h.redis.zscore(index, 'b')), later);
});

test("tenant_index scores a tenant's create by Redis's clock", async () => {
  const tenants = 'tl:{ops}:tenants';
  const before = await serverTime(h.redis, tenants);
  assert.equal(await h.redis.eval(scriptSource('tenant_index'), 1, tenants, 'acme'), 1);
  const after = await serverTime(h.redis, tenants);
  const score = Number(await h.redis.zscore(tenants, 'acme'));
  assert.ok(score >= before && score <= after, `${score}`);
});

test('a worker script run twice with the same arguments (re-sent after its reply was lost) writes once and answers as it did', async () => {
  await h.redis.del(...keys);
  await h.redis.hset(keys[0]!, { status: 'running', attempt: 1, seq: 0, kind: 'tool', created_at: 1 });
  // append's KEYS[4] is the token snapshot.
  const append = () =>
    h.redis.eval(
      scriptSource('append'),
      4,
      keys[0]!,
      keys[1]!,
      keys[2]!,
      keys[4]!,
      10,
      1,
      'step_a',
      '5,6,',
      'delta',
      '{"d":"x"}',
    );
  assert.deepEqual(await append(), ['ok', 1]);
  assert.deepEqual(await append(), ['ok', 1]);
  assert.equal(await h.redis.get(keys[4]!), '5,6,');
  const ask = () =>
    evalScript('request_input', 4, 20, 1, 1000, '["q"]', 1, 'q', '{}', 'input', '{}', 'step_b');
  assert.deepEqual(await ask(), ['ok', 2, 'tool', '1']);
  assert.deepEqual(await ask(), ['ok', 2, 'tool', '1']);
  assert.equal(await h.redis.xlen(keys[1]!), 2);
});
