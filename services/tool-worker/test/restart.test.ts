/**
 * Each `on_restart` policy of a tool, after its worker is SIGKILLed mid-run and after a SIGTERM
 * drain past its deadline: `resume` continues after the last checkpoint (completed steps are not
 * run again), `retry` starts over, `fail` ends `failed` with `server_restarted`. The task is made
 * by a real MCP call on the api; real tool-worker processes run it.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { EngineStack } from '@taskline/test-support/engine-stack';
import type { Replica } from '@taskline/test-support/mcp-stack';
import { rpc } from '@taskline/test-support/mcp';
import type { OnRestart } from '@taskline/tool-sdk';
import { KEY_A, LONG_LEASE, startOneApiToolStack, toolWorker } from './helpers.js';

const COUNT = 6;

/** The steps each attempt started, from the progress events (`attempt <a> step <s>`). */
async function stepsByAttempt(cluster: EngineStack, id: string): Promise<Map<number, number[]>> {
  const byAttempt = new Map<number, number[]>();
  for (const e of await cluster.events(id)) {
    const m = /^attempt (\d+) step (\d+)$/.exec(String(e.status_message ?? ''));
    if (!m) continue;
    const attempt = Number(m[1]);
    byAttempt.set(attempt, [...(byAttempt.get(attempt) ?? []), Number(m[2])]);
  }
  return byAttempt;
}

describe('tool on_restart policies after a crash and a drain past its deadline', () => {
  let cluster: EngineStack;
  let api: Replica;
  before(async () => {
    ({ cluster, api } = await startOneApiToolStack());
  });
  after(() => cluster.stop());

  /**
   * Calls `steps_<policy>` as a task, interrupts its worker with `signal` once step 2 has been
   * checkpointed (steps 0 and 1 done), lets a fresh worker take over and returns the ended task.
   */
  async function interrupted(policy: OnRestart, signal: 'SIGKILL' | 'SIGTERM') {
    const first = await toolWorker(cluster, 'steps.ts');
    const call = await rpc(
      api.url,
      'tools/call',
      { name: `steps_${policy}`, arguments: { count: COUNT } },
      { token: KEY_A },
    );
    const id = call.message.result?.taskId as string;
    assert.ok(id, JSON.stringify(call.message));
    await cluster.waitFor(id, 'step 2 started', (t) => /step 2$/.test(t.statusMessage ?? ''), 20_000);
    await first.kill(signal);
    const second = await toolWorker(cluster, 'steps.ts', LONG_LEASE);
    try {
      const task = await cluster.waitForEnd(id, 30_000);
      const reasons = (await cluster.events(id)).map((e) => e.reason).filter((r) => r !== undefined);
      return { task, steps: await stepsByAttempt(cluster, id), reasons };
    } finally {
      await second.kill('SIGTERM');
    }
  }

  /** The restart reason each interruption is: a crash is a lost worker, a drain past its deadline a draining one. */
  const REASON = { SIGKILL: 'worker_lost', SIGTERM: 'worker_draining' } as const;
  const DETAIL = { SIGKILL: /stopped before it finished/, SIGTERM: /shut down before it finished/ } as const;

  for (const signal of ['SIGKILL', 'SIGTERM'] as const) {
    it(`resume after ${signal}: the next attempt continues after the last checkpoint`, async () => {
      const { task, steps, reasons } = await interrupted('resume', signal);
      assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
      assert.deepEqual(reasons, [REASON[signal]]);
      const result = task.result as {
        structuredContent: { ran: number[]; attempt: number; idempotencyKey: string };
      };
      assert.deepEqual(steps.get(1)?.slice(0, 3), [0, 1, 2]);
      // Steps 0 and 1 were checkpointed by attempt 1: attempt 2 starts at step 2, never before.
      assert.deepEqual(steps.get(2), [2, 3, 4, 5]);
      assert.deepEqual(result.structuredContent.ran, [2, 3, 4, 5]);
      assert.equal(result.structuredContent.idempotencyKey, task.id);
    });

    it(`retry after ${signal}: the next attempt starts over`, async () => {
      const { task, steps, reasons } = await interrupted('retry', signal);
      assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
      assert.deepEqual(reasons, [REASON[signal]]);
      assert.deepEqual(steps.get(2), [0, 1, 2, 3, 4, 5]);
      assert.deepEqual(
        (task.result as { structuredContent: { ran: number[] } }).structuredContent.ran,
        [0, 1, 2, 3, 4, 5],
      );
    });

    it(`fail after ${signal}: the task ends failed with server_restarted`, async () => {
      const { task, steps } = await interrupted('fail', signal);
      assert.equal(task.status, 'failed');
      assert.equal(task.error?.code, 'server_restarted');
      assert.match(task.error?.detail ?? '', DETAIL[signal]);
      assert.equal(steps.get(2), undefined);
    });
  }
});
