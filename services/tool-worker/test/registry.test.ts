/**
 * The live registry: a tool appears in `tools/list` on two api replicas, both MCP eras, within
 * seconds of its worker starting, without restarting them; it leaves once its last worker is
 * gone, and a call to it is then the unknown-tool error. Real processes throughout.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Cluster } from '@taskline/test-support/cluster';
import type { Replica } from '@taskline/test-support/mcp-stack';
import { pollTask, rpc } from '@taskline/test-support/mcp';
import { until } from '@taskline/testing';
import { KEY_A, list2025, list2026, startToolStack, toolWorker } from './helpers.js';

const STEPS = ['steps_fail', 'steps_resume', 'steps_retry'];

describe('the live tool registry across api replicas', () => {
  let cluster: Cluster;
  let apis: Replica[];
  before(async () => {
    ({ cluster, apis } = await startToolStack(2));
  });
  after(() => cluster.stop());

  it('lists a worker tool on both replicas and both eras once its worker starts, and not after it is gone', async () => {
    for (const api of apis) {
      assert.deepEqual(await list2026(api.url, KEY_A), ['batch_generate', 'generate']);
      assert.deepEqual(await list2025(api.url, KEY_A), ['batch_generate', 'generate']);
    }
    const worker = await toolWorker(cluster, 'steps.ts');
    const expected = ['batch_generate', 'generate', ...STEPS];
    for (const api of apis) {
      await until(
        'the worker tools listed (2026-07-28)',
        async () => ((await list2026(api.url, KEY_A)).join() === expected.join() ? true : undefined),
        5000,
      );
      assert.deepEqual(await list2025(api.url, KEY_A), expected);
    }
    // Called through one replica, run by the worker, read through the other.
    const call = await rpc(
      apis[0]!.url,
      'tools/call',
      { name: 'steps_retry', arguments: { count: 1 } },
      { token: KEY_A },
    );
    const taskId = call.message.result?.taskId as string;
    assert.ok(taskId, JSON.stringify(call.message));
    const task = await cluster.store.get(taskId);
    assert.equal(task?.model, 'tool:steps_retry');
    assert.equal(task?.onRestart, 'retry');
    await pollTask(apis[1]!.url, taskId, (t) => t.status === 'completed', {
      token: KEY_A,
      timeoutMs: 20_000,
    });
    const done = (await cluster.store.get(taskId))?.result as { structuredContent: { ran: number[] } };
    assert.deepEqual(done.structuredContent.ran, [0]);

    // Drained: out of every list within the cache time, and a call is the unknown-tool error.
    await worker.kill('SIGTERM');
    for (const api of apis)
      await until(
        'the worker tools gone',
        async () =>
          (await list2026(api.url, KEY_A)).join() === 'batch_generate,generate' ? true : undefined,
        5000,
      );
    const gone = await rpc(
      apis[0]!.url,
      'tools/call',
      { name: 'steps_retry', arguments: { count: 1 } },
      { token: KEY_A },
    );
    const unknown = await rpc(
      apis[0]!.url,
      'tools/call',
      { name: 'steps_nothing', arguments: { count: 1 } },
      { token: KEY_A },
    );
    assert.equal(
      JSON.stringify(gone.message.error).replace('steps_retry', 'X'),
      JSON.stringify(unknown.message.error).replace('steps_nothing', 'X'),
    );
  });

  it('drops a worker that dies without a word once its entry expires', async () => {
    const worker = await toolWorker(cluster, 'private.ts');
    await until(
      'private_echo listed',
      async () => ((await list2026(apis[1]!.url, KEY_A)).includes('private_echo') ? true : undefined),
      5000,
    );
    await worker.kill('SIGKILL');
    await until(
      'private_echo gone after its TTL',
      async () => ((await list2026(apis[1]!.url, KEY_A)).includes('private_echo') ? undefined : true),
      6000,
    );
  });
});
