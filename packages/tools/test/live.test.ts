/**
 * The live tool registry on a real Redis: what a tenant sees (public and its own private tools),
 * which version is listed while two are live (the worker that started last), the slots of all
 * workers summed, and a worker gone once Redis expires its entry or it withdraws; a tool's
 * deployment (its last announcement, retained) listed while no worker serves it, to its tenants only.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { startRedis, until, type RedisServer } from '@taskline/testing';
import { connectRedis } from '@taskline/engine';
import { builtinTools, LiveTools, type LiveToolEntry, type LiveWorkerEntry } from '../src/index.js';

const tool = (name: string, version: string, slots = 1): LiveToolEntry => ({
  name,
  description: `${name} ${version}`,
  inputSchema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] },
  taskSupport: 'optional',
  onRestart: 'resume',
  version,
  slots,
});

const worker = (
  id: string,
  startedAt: number,
  tenants: LiveWorkerEntry['tenants'],
  tools: LiveToolEntry[],
) => ({
  worker: id,
  tenants,
  startedAt,
  heartbeatAt: startedAt,
  tools,
});

describe('LiveTools', () => {
  let server: RedisServer;
  let live: LiveTools;
  const connections: ReturnType<typeof connectRedis>[] = [];
  const redis = () => {
    connections.push(connectRedis(server.url, 'live-test'));
    return connections.at(-1)!;
  };

  before(async () => {
    server = await startRedis();
    live = new LiveTools(redis(), { cacheMs: 0 });
  });
  after(async () => {
    for (const c of connections) c.disconnect();
    await server.stop();
  });

  it('lists the newest version of a tool during a rolling deploy, with every worker slot', async () => {
    await live.announce(worker('old', 1000, '*', [tool('report', 'v1', 2)]), 10_000);
    await live.announce(worker('new', 2000, '*', [tool('report', 'v2', 3)]), 10_000);
    const [report] = await live.visible('anyone');
    assert.equal(report?.version, 'v2');
    assert.equal(report?.description, 'report v2');
    assert.equal(report?.slots, 5);
    await live.withdraw('old');
    await live.withdraw('new');
    assert.deepEqual(await live.visible('anyone'), []);
  });

  it('shows a private tool to its tenants only; a built-in name wins; the queue and policy follow the tool', async () => {
    await live.announce(
      worker('private', 1000, ['tenant-a'], [tool('secret', 'v1'), tool('generate', 'v9')]),
      10_000,
    );
    assert.deepEqual(
      (await live.visible('tenant-b')).map((t) => t.name),
      [],
    );
    const base = builtinTools({ batchConfirmAboveTokens: 1 });
    const forA = await live.registryFor('tenant-a', base);
    assert.deepEqual(
      forA.list().map((t) => t.name),
      ['generate', 'batch_generate', 'secret'],
    );
    assert.deepEqual(forA.placement('secret'), { queue: 'tool:secret', onRestart: 'resume', version: 'v1' });
    assert.equal(forA.placement('generate')?.queue, 'tools');
    assert.equal(forA.get('secret')?.inputSchema.safeParse({ n: 1 }).success, true);
    assert.equal(forA.get('secret')?.inputSchema.safeParse({ n: 'x' }).success, false);
    assert.equal(await live.registryFor('tenant-b', base), base);
    await live.withdraw('private');
  });

  it('forgets a worker whose entry Redis expired, and drops its id', async () => {
    // Listed while its entry lives: a TTL no starved host outlasts before the read. Then its last
    // announcement gives the entry a millisecond, and Redis expires it by its clock.
    const short = worker('short', 1000, '*', [tool('brief', 'v1')]);
    await live.announce(short, 30_000);
    assert.equal((await live.visible('x')).length, 1);
    await live.announce(short, 1);
    await sleep(400);
    assert.deepEqual(await live.visible('x'), []);
    assert.deepEqual(await redis().smembers('tl:{tools}:workers'), []);
  });

  it('reuses what it read for cacheMs', async () => {
    const cached = new LiveTools(redis(), { cacheMs: 60_000 });
    assert.deepEqual(await cached.visible('x'), []);
    await live.announce(worker('later', 1000, '*', [tool('late', 'v1')]), 10_000);
    assert.deepEqual(await cached.visible('x'), []);
    assert.equal((await live.visible('x')).length, 1);
    await live.withdraw('later');
  });

  it('keeps a retained tool listed, with 0 slots, after its last worker left, to its tenants only', async () => {
    const base = builtinTools({ batchConfirmAboveTokens: 1 });
    await live.announce(worker('pool-1', 1000, ['tenant-a'], [tool('nightly', 'v1', 2)]), 10_000, 60_000);
    await live.withdraw('pool-1');
    assert.deepEqual(await live.workers(), []);
    const [nightly] = await live.visible('tenant-a');
    assert.deepEqual(nightly, tool('nightly', 'v1', 0));
    assert.deepEqual(await live.visible('tenant-b'), []);
    assert.equal((await live.registryFor('tenant-a', base)).placement('nightly')?.queue, 'tool:nightly');
    assert.equal(await live.registryFor('tenant-b', base), base);
    // Another worker starts: the live entry is listed again, with its slots.
    await live.announce(worker('pool-2', 2000, ['tenant-a'], [tool('nightly', 'v2', 3)]), 10_000, 60_000);
    assert.deepEqual(await live.visible('tenant-a'), [tool('nightly', 'v2', 3)]);
    await live.withdraw('pool-2');
    assert.deepEqual(await live.visible('tenant-a'), [tool('nightly', 'v2', 0)]);
    await redis().del('tl:{tools}:deployed:nightly');
  });

  it('never lists a deployment while a live worker serves the name, whatever its tenants', async () => {
    await live.announce(worker('wide', 1000, '*', [tool('narrowed', 'v1')]), 10_000, 60_000);
    await live.withdraw('wide');
    await live.announce(worker('narrow', 2000, ['tenant-a'], [tool('narrowed', 'v2')]), 10_000);
    assert.deepEqual(await live.visible('tenant-b'), []);
    assert.deepEqual(
      (await live.visible('tenant-a')).map((t) => t.version),
      ['v2'],
    );
    await live.withdraw('narrow');
    await redis().del('tl:{tools}:deployed:narrowed');
  });

  it('ends the deployment of a withdrawn tool at once, and of any tool once its retention passes', async () => {
    await live.announce(worker('gw', 1000, '*', [tool('up_a', 'v1'), tool('up_b', 'v1')]), 10_000, 300);
    await live.announce(
      { ...worker('gw', 1000, '*', [tool('up_a', 'v1')]), withdrawn: ['up_b'] },
      10_000,
      300,
    );
    await live.withdraw('gw');
    assert.deepEqual(
      (await live.visible('x')).map((t) => t.name),
      ['up_a'],
    );
    await until('the retention passed', async () =>
      (await live.visible('x')).length === 0 ? true : undefined,
    );
    assert.deepEqual(await redis().smembers('tl:{tools}:deployed'), []);
  });

  it('keeps no deployment with a retention of 0: the tool leaves with its last worker', async () => {
    await live.announce(worker('plain', 1000, '*', [tool('plain', 'v1')]), 10_000, 0);
    await live.withdraw('plain');
    assert.deepEqual(await live.visible('x'), []);
  });
});
