/**
 * The live registry: a tool appears in `tools/list` on two api replicas, both MCP eras, within
 * seconds of its worker starting, without restarting them; with no deployment retained
 * (TASKLINE_TOOL_DEPLOYED_RETENTION_MS 0) it leaves once its last worker is gone, and a call to it
 * is then the unknown-tool error (scale-from-zero.test.ts: what a retained one does). Real
 * processes throughout.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { EngineStack } from '@taskline/test-support/engine-stack';
import type { Replica } from '@taskline/test-support/mcp-stack';
import { pollTask, rpc } from '@taskline/test-support/mcp';
import { until } from '@taskline/testing';
import { LiveTools } from '@taskline/tools';
import { ADMIN_KEY, KEY_A, list2025, list2026, startToolStack, toolWorker } from './helpers.js';

const STEPS = ['steps_fail', 'steps_resume', 'steps_retry'];

describe('the live tool registry across api replicas', () => {
  let cluster: EngineStack;
  let apis: Replica[];
  before(async () => {
    ({ cluster, apis } = await startToolStack(2));
  });
  after(() => cluster.stop());

  it('lists a worker tool on both replicas and both eras once its worker starts, and, unretained, not after it is gone', async () => {
    for (const api of apis) {
      assert.deepEqual(await list2026(api.url, KEY_A), ['batch_generate', 'generate']);
      assert.deepEqual(await list2025(api.url, KEY_A), ['batch_generate', 'generate']);
    }
    const worker = await toolWorker(cluster, 'steps.ts', { TASKLINE_TOOL_DEPLOYED_RETENTION_MS: '0' });
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

  it('runs at most `concurrency` tasks of a tool at once per worker (steps_*: 2), the rest queued', async () => {
    const worker = await toolWorker(cluster, 'steps.ts');
    const [entry] = await new LiveTools(cluster.store.redis, { cacheMs: 0 }).visible('tenant-a');
    assert.equal(entry?.slots, 2);
    // The operator console's workers view shows it: its queues with their slots, its tool versions.
    const admin = apis[0]!.url.replace(/\/mcp$/, '/admin/v1/workers');
    const shown = await until(
      'the tool worker on the console',
      async () => {
        const { workers } = (await (
          await fetch(admin, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })
        ).json()) as {
          workers: {
            worker_id: string;
            models: { model: string; slots: number }[];
            tools: { name: string; version: string }[];
          }[];
        };
        return workers.find((w) => w.tools.length > 0);
      },
      5000,
    );
    assert.deepEqual(shown.models.map((m) => `${m.model} ${m.slots}`).sort(), [
      'tool:steps_fail 2',
      'tool:steps_resume 2',
      'tool:steps_retry 2',
    ]);
    assert.deepEqual(shown.tools.map((t) => t.name).sort(), STEPS);
    const version = shown.tools.find((t) => t.name === entry?.name)?.version;
    assert.equal(version, entry?.version);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const call = await rpc(
        apis[0]!.url,
        'tools/call',
        { name: 'steps_fail', arguments: { count: 4 } },
        { token: KEY_A },
      );
      ids.push(call.message.result?.taskId as string);
    }
    const statuses = async () => Promise.all(ids.map(async (id) => (await cluster.store.get(id))?.status));
    await until(
      'two tasks running',
      async () => ((await statuses()).filter((s) => s === 'running').length === 2 ? true : undefined),
      10_000,
    );
    // Each takes 1.2 s: while two run, the third waits for a slot.
    assert.deepEqual((await statuses()).filter((s) => s === 'queued').length, 1);
    for (const id of ids) assert.equal((await cluster.waitForEnd(id, 20_000)).status, 'succeeded');
    await worker.kill('SIGTERM');
  });

  it("TASKLINE_TOOL_CONCURRENCY (the chart pool's `concurrency`) overrides every tool's own", async () => {
    const worker = await toolWorker(cluster, 'steps.ts', { TASKLINE_TOOL_CONCURRENCY: '3' });
    try {
      const live = await new LiveTools(cluster.store.redis, { cacheMs: 0 }).visible('tenant-a');
      assert.deepEqual(
        live.map((t) => `${t.name} ${t.slots}`).sort(),
        STEPS.map((name) => `${name} 3`),
      );
    } finally {
      await worker.kill('SIGTERM');
    }
  });

  it("the console names a tool task's tool, in the tenant's task list and on the task", async () => {
    const worker = await toolWorker(cluster, 'steps.ts');
    try {
      const call = await rpc(
        apis[0]!.url,
        'tools/call',
        { name: 'steps_retry', arguments: { count: 1 } },
        { token: KEY_A },
      );
      const id = call.message.result?.taskId as string;
      assert.ok(id, JSON.stringify(call.message));
      const admin = (path: string) =>
        fetch(apis[0]!.url.replace(/\/mcp$/, `/admin/v1${path}`), {
          headers: { authorization: `Bearer ${ADMIN_KEY}` },
        }).then((r) => r.json() as Promise<Record<string, unknown>>);
      const { data } = (await admin('/tenants/tenant-a/tasks?type=tool')) as {
        data: { id: string; tool: string | null }[];
      };
      assert.equal(data.find((t) => t.id === id)?.tool, 'steps_retry');
      const { task } = (await admin(`/tasks/${id}`)) as { task: { tool: string | null } };
      assert.equal(task.tool, 'steps_retry');
      await cluster.waitForEnd(id, 20_000);
    } finally {
      await worker.kill('SIGTERM');
    }
  });

  it('drops a worker that dies without a word once its entry expires', async () => {
    const worker = await toolWorker(cluster, 'private.ts', { TASKLINE_TOOL_DEPLOYED_RETENTION_MS: '0' });
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
