/**
 * A tool worker whose module fails to load, or that holds an invalid tool, stops at start: exit code
 * non-zero, the reason on stderr, and nothing registered or claimed (a queued task of its valid
 * tool stays queued). Real Redis, a real scheduler, the real tool-worker process.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { ROOT, startRedis } from '@taskline/testing';
import { EngineStack } from '@taskline/test-support/engine-stack';

const FIXTURES = 'services/tool-worker/test/fixtures';

describe('tool worker start failures', () => {
  let cluster: EngineStack;
  before(async () => {
    cluster = await EngineStack.start();
  });
  after(() => cluster.stop());

  /** Registry keys of the live tool registry (tl:{tools}:*). */
  const registryKeys = () => cluster.store.redis.keys('tl:{tools}:*');

  it('a module that throws at load exits non-zero with its message and registers nothing', async () => {
    const worker = cluster.stack.toolWorker(`${FIXTURES}/throws.ts`, {
      TASKLINE_SCHEDULER_ADDR: cluster.schedulerAddr,
    });
    await assert.rejects(worker.up, /the tool module exploded while loading/);
    assert.equal(await worker.exited, 1);
    assert.deepEqual(await registryKeys(), []);
  });

  it('an invalid tool name stops the worker before it claims a queued task of the module', async () => {
    const queued = await cluster.store.create({
      tenant: 't1',
      kind: 'tool',
      model: 'tool:fine_tool',
      onRestart: 'fail',
      request: { tool: 'fine_tool', arguments: {} },
    });
    const worker = cluster.stack.toolWorker(`${FIXTURES}/invalid.ts`, {
      TASKLINE_SCHEDULER_ADDR: cluster.schedulerAddr,
    });
    await assert.rejects(worker.up, /tool \\"broken tool!\\": name must be 1-128 of A-Z a-z 0-9 _ - \./);
    assert.equal(await worker.exited, 1);
    // Long enough for a dispatch round and a claim, had the worker reported slots.
    await sleep(1000);
    const task = await cluster.store.get(queued.id);
    assert.equal(task?.status, 'queued');
    assert.equal(task?.attempt, 0);
    assert.deepEqual(await registryKeys(), []);
  });

  it('a Redis that would lose what it acknowledges (AOF off) stops the worker at start, naming why, as every service', async () => {
    const plain = await startRedis({ args: ['--appendonly', 'no'] });
    try {
      const worker = cluster.stack.toolWorker(`${FIXTURES}/steps.ts`, {
        TASKLINE_SCHEDULER_ADDR: cluster.schedulerAddr,
        REDIS_URL: plain.url,
      });
      await assert.rejects(worker.up, /Redis runs without AOF/);
      assert.equal(await worker.exited, 1);
    } finally {
      await plain.stop();
    }
  });

  it('no module at all is a usage error, not a worker serving nothing', async () => {
    const worker = cluster.stack.toolWorker('', { TASKLINE_SCHEDULER_ADDR: cluster.schedulerAddr });
    await assert.rejects(worker.up, /no tool module or upstreams given/);
    assert.equal(await worker.exited, 1);
  });

  it('a bad upstream configuration exits 1 naming the field, before anything registers', async () => {
    const worker = cluster.stack.toolWorker('', {
      TASKLINE_SCHEDULER_ADDR: cluster.schedulerAddr,
      TASKLINE_UPSTREAMS: JSON.stringify({
        upstreams: [{ name: 'ev', transport: { type: 'http', url: 'nope' } }],
      }),
    });
    await assert.rejects(worker.up, /upstream configuration: upstreams\.0\.transport\.url/);
    assert.equal(await worker.exited, 1);
    assert.deepEqual(await registryKeys(), []);
  });

  it('`taskline tool-worker --module` is the same worker: a module that cannot load exits 1 naming it', () => {
    const run = spawnSync(
      process.execPath,
      ['packages/cli/bin/taskline.js', 'tool-worker', '--module', './no-such-tools.js'],
      {
        cwd: ROOT,
        env: { ...process.env, REDIS_URL: cluster.redis.url },
        encoding: 'utf8',
      },
    );
    assert.equal(run.status, 1);
    assert.match(run.stderr, /tool module \.\/no-such-tools\.js failed to load/);
  });
});
