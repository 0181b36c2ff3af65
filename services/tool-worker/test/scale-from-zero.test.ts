/**
 * Scale from zero: a tool whose pool has no worker left stays listed (its deployment), a call to it
 * is a task queued on `tool:<name>`, counted in the leader's `taskline_queue_depth` (what the
 * chart's KEDA query reads), and the next worker runs it to the end. A tool never deployed is
 * still the unknown-tool error. Real processes, official SDK clients for the lists and one call.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import type { EngineStack } from '@taskline/test-support/engine-stack';
import type { Replica } from '@taskline/test-support/mcp-stack';
import { pollTask, rpc } from '@taskline/test-support/mcp';
import { until } from '@taskline/testing';
import { LiveTools } from '@taskline/tools';
import { KEY_A, list2025, list2026, startOneApiToolStack, toolWorker, v1Client } from './helpers.js';

const LISTED = ['batch_generate', 'generate', 'steps_fail', 'steps_resume', 'steps_retry'];

/** The leader scheduler's `taskline_queue_depth` of `tool:<name>`, summed over tenants. */
async function queueDepth(cluster: EngineStack, name: string): Promise<number> {
  let total = 0;
  for (const scheduler of cluster.stack.schedulers) {
    const port = scheduler.readyLine?.metrics_port;
    if (port === undefined) continue;
    const text = await (await fetch(`http://127.0.0.1:${String(port)}/metrics`)).text();
    for (const line of text.split('\n'))
      if (line.startsWith('taskline_queue_depth{') && line.includes(`model="tool:${name}"`))
        total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}

describe('a tool pool scaled to zero', () => {
  let cluster: EngineStack;
  let api: Replica;
  const live = () => new LiveTools(cluster.store.redis, { cacheMs: 0 });
  before(async () => {
    ({ cluster, api } = await startOneApiToolStack());
  });
  after(() => cluster.stop());

  it('keeps its tools listed and callable; calls queue, are counted, and run on the next worker', async () => {
    const first = await toolWorker(cluster, 'steps.ts');
    await until(
      'the tools listed',
      async () => ((await list2026(api.url, KEY_A)).join() === LISTED.join() ? true : undefined),
      5000,
    );
    await first.kill('SIGTERM');
    await until('no live worker left', async () =>
      (await live().workers()).length === 0 ? true : undefined,
    );

    // At zero: still listed on both eras.
    assert.deepEqual(await list2026(api.url, KEY_A), LISTED);
    assert.deepEqual(await list2025(api.url, KEY_A), LISTED);

    // A 2026-07-28 call becomes a task that waits: `working` to the caller, `queued` in the engine.
    const call = await rpc(
      api.url,
      'tools/call',
      { name: 'steps_retry', arguments: { count: 1 } },
      { token: KEY_A },
    );
    const queuedId = call.message.result?.taskId as string;
    assert.ok(queuedId, JSON.stringify(call.message));
    assert.equal(
      (await rpc(api.url, 'tasks/get', { taskId: queuedId }, { token: KEY_A })).message.result?.status,
      'working',
    );
    const stored = await cluster.store.get(queuedId);
    assert.equal(stored?.status, 'queued');
    assert.equal(stored?.model, 'tool:steps_retry');

    // A 2025-11-25 SDK client's task call: its CreateTaskResult now, its result once a worker runs it.
    const client = await v1Client(api.url, KEY_A, { tasks: { list: {}, cancel: {} } });
    // As hosts do: the listing tells `callToolStream` that the tool runs as a task.
    await client.listTools();
    const seen: { type: string; task?: { taskId: string }; result?: Record<string, unknown> }[] = [];
    const stream = (async () => {
      for await (const m of client.experimental.tasks.callToolStream(
        { name: 'steps_retry', arguments: { count: 2 } },
        CallToolResultSchema,
        { timeout: 60_000 },
      ))
        seen.push(m as never);
    })();
    const streamedId = await until(
      'the SDK call made a task',
      async () => seen.find((m) => m.task)?.task?.taskId,
    );
    assert.equal((await cluster.store.get(streamedId))?.status, 'queued');

    // What KEDA reads: the leader's queue depth of the tool's queue counts both.
    await until('both counted in taskline_queue_depth', async () =>
      (await queueDepth(cluster, 'steps_retry')) === 2 ? true : undefined,
    );

    // The pool scales up: the new worker takes both and runs them to the end.
    const second = await toolWorker(cluster, 'steps.ts');
    try {
      const done = await pollTask(api.url, queuedId, (t) => t.status === 'completed', {
        token: KEY_A,
        timeoutMs: 30_000,
      });
      assert.equal(done.status, 'completed');
      const result = (await cluster.store.get(queuedId))?.result as { structuredContent: { ran: number[] } };
      assert.deepEqual(result.structuredContent.ran, [0]);
      await stream;
      const streamed = seen.find((m) => m.type === 'result')?.result as
        { isError?: boolean; structuredContent?: { ran: number[] } } | undefined;
      assert.ok(streamed, JSON.stringify(seen));
      assert.deepEqual(streamed.structuredContent?.ran, [0, 1]);
      await until('the queue drained', async () =>
        (await queueDepth(cluster, 'steps_retry')) === 0 ? true : undefined,
      );
    } finally {
      await client.close();
      await second.kill('SIGTERM');
    }
  });

  it('still refuses a tool never deployed, as an unknown tool, with no task made', async () => {
    const unknown = await rpc(
      api.url,
      'tools/call',
      { name: 'steps_never', arguments: { count: 1 } },
      { token: KEY_A },
    );
    assert.equal(unknown.message.result?.taskId, undefined);
    assert.match(JSON.stringify(unknown.message), /Tool steps_never not found/);
  });
});
