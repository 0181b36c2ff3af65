import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { scriptSource } from '../src/index.js';
import { harness, type Harness } from './helpers.js';

// The scripts on their own, through plain EVAL: the header comments are their contract.
let h: Harness;
before(async () => (h = await harness()));
after(() => h.close());

const keys = ['tl:{t}:task', 'tl:{t}:events', 'tl:{t}:ev', 'tl:{t}:inputs', 'tl:{t}:tokens'];
const evalScript = (name: Parameters<typeof scriptSource>[0], n: number, ...args: (string | number)[]) =>
  h.redis.eval(scriptSource(name), n, ...keys.slice(0, n), ...args) as Promise<unknown[]>;

test('create refuses an id that exists', async () => {
  assert.deepEqual(await evalScript('create', 3, 1, 1, 'tenant', 'a', 'response.created', '{}'), ['ok', 1]);
  assert.deepEqual(await evalScript('create', 3, 2, 1, 'tenant', 'b', 'response.created', '{}'), ['exists']);
  assert.equal(await h.redis.hget(keys[0]!, 'tenant'), 'a');
});

test('transition checks the allowed sources, the fence and the lease', async () => {
  const move = (to: string, from: string, fence: string, lease: string, terminal = 0) =>
    evalScript('transition', 5, 10, to, from, fence, lease, 1000, 1000, terminal, 0, 'e', '{}');
  assert.deepEqual(await move('running', 'loading', '', ''), ['illegal', 'queued']);
  await h.redis.hset(
    keys[0]!,
    'status',
    'running',
    'attempt',
    2,
    'lease_until',
    50,
    'kind',
    'tool',
    'created_at',
    5,
  );
  assert.deepEqual(await move('failed', 'running', '1', ''), ['stale', 'running', '2']);
  assert.deepEqual(await move('failed', 'running', '2', '40'), ['lease_held', 'running']);
  assert.deepEqual(await move('failed', 'running', '2', '60', 1), ['ok', 'failed', 2, 'tool', '5']);
  assert.deepEqual(await move('running', 'failed', '', ''), ['terminal', 'failed']);
  assert.ok((await h.redis.pttl(keys[0]!)) > 0);
  assert.deepEqual(await h.redis.hmget(keys[0]!, 'lease_until', 'ended_at'), [null, '10']);
});

test('renew answers the status and refuses other attempts', async () => {
  await h.redis.del(keys[0]!);
  await h.redis.hset(keys[0]!, 'status', 'cancelling', 'attempt', 3);
  assert.deepEqual(await evalScript('renew', 1, 100, 3, 500), ['ok', 'cancelling']);
  assert.equal(await h.redis.hget(keys[0]!, 'lease_until'), '600');
  assert.deepEqual(await evalScript('renew', 1, 100, 2, 500), ['stale', 'cancelling']);
});
