/**
 * SIGKILL of a gateway tool worker during a long upstream call: the upstream tool's `on_restart`
 * policy holds. `fail` (the default) ends the task `failed` (`server_restarted`) with the upstream
 * called once; `retry` and `resume` call it again on the next worker (a plain upstream keeps no
 * checkpoint, so `resume` starts over too) and succeed. The upstream counts its calls.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EngineStack } from '@taskline/test-support/engine-stack';
import type { Replica } from '@taskline/test-support/mcp-stack';
import { rpc } from '@taskline/test-support/mcp';
import type { OnRestart } from '@taskline/tool-sdk';
import { KEY_A, LONG_LEASE, startOneApiToolStack } from './helpers.js';
import { FLAKY, gatewayWorker, textOf } from './upstreams.js';

describe('gateway on_restart policies after a SIGKILL during an upstream call', () => {
  let cluster: EngineStack;
  let api: Replica;
  let dir: string;
  before(async () => {
    ({ cluster, api } = await startOneApiToolStack());
    dir = await mkdtemp(join(tmpdir(), 'gateway-restart-'));
  });
  after(async () => {
    await cluster?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** One upstream per policy (`onRestart` unset for `fail`: the default), each counting its calls in its own file. */
  const upstreams = () =>
    (['fail', 'retry', 'resume'] as const).map((policy) => ({
      name: policy,
      transport: {
        type: 'stdio',
        command: process.execPath,
        args: [FLAKY],
        env: { COUNT_FILE: join(dir, policy) },
      },
      ...(policy !== 'fail' && { onRestart: policy }),
    }));
  const calls = async (policy: OnRestart) =>
    (await readFile(join(dir, policy), 'utf8').catch(() => '')).split('\n').filter((l) => l === 'call')
      .length;

  for (const policy of ['fail', 'retry', 'resume'] as const)
    it(`${policy}: ${policy === 'fail' ? 'fails the task, the upstream called once' : 'calls the upstream again and succeeds'}`, async () => {
      const first = await gatewayWorker(cluster, upstreams());
      const call = await rpc(
        api.url,
        'tools/call',
        { name: `${policy}_slow`, arguments: { ms: 2000 } },
        { token: KEY_A },
      );
      const id = call.message.result?.taskId as string;
      assert.ok(id, JSON.stringify(call.message));
      assert.equal((await cluster.store.get(id))?.onRestart, policy);
      await cluster.waitFor(
        id,
        'upstream progress',
        (t) => /^[3-9]\/20$/.test(t.statusMessage ?? ''),
        10_000,
      );
      await first.kill('SIGKILL');
      const second = await gatewayWorker(cluster, upstreams(), LONG_LEASE);
      try {
        const task = await cluster.waitForEnd(id, 30_000);
        const reasons = (await cluster.events(id)).map((e) => e.reason).filter((r) => r !== undefined);
        if (policy === 'fail') {
          assert.equal(task.status, 'failed');
          assert.equal(task.error?.code, 'server_restarted');
          assert.match(task.error?.detail ?? '', /stopped before it finished/);
          assert.equal(await calls(policy), 1);
        } else {
          assert.deepEqual(reasons, ['worker_lost']);
          assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
          assert.equal(textOf(task.result), 'slow done after 20 steps');
          assert.equal(await calls(policy), 2);
        }
      } finally {
        await second.kill('SIGTERM');
      }
    });
});
