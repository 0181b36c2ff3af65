/**
 * A tool task's child generation (`tool:<parent>:<n>`) outlives the attempt that started it: a
 * retried attempt replays the same steps and waits on the same child. So only the task's own
 * cancel may cancel it; an attempt stopped because its lease was lost or its worker drained must
 * leave it to its successor. Real Redis; the test plays the workers (claims, finishes the child).
 */
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, until, type RedisServer } from '@taskline/testing';
import { connectRedis, TaskStore, type TaskRecord } from '@taskline/engine';
import { idempotencyKey } from '@taskline/engine/keys';
import { builtinTools, createToolRunner, TOOLS_MODEL, type ToolRunner } from '../src/index.js';

const TENANT = 'tenant-f';

describe('tool runner: a stopped attempt never cancels the child generation its successor uses', () => {
  let server: RedisServer;
  let store: TaskStore;
  let runner: ToolRunner;

  before(async () => {
    server = await startRedis();
    store = new TaskStore(connectRedis(server.url, 'fencing-test'), {
      taskRetentionMs: 60_000,
      eventRetentionMs: 60_000,
      idempotencyTtlS: 86_400,
      idempotencyPendingMs: 30_000,
    });
    runner = createToolRunner(builtinTools({ batchConfirmAboveTokens: 1e9 }));
  });
  after(async () => {
    await runner.close();
    store.redis.disconnect();
    await server.stop();
  });

  const childOf = async (taskId: string): Promise<TaskRecord | undefined> => {
    const hash = createHash('sha256').update(`tool:${taskId}:0`).digest('hex');
    const id = await store.redis.hget(idempotencyKey(TENANT, hash), 'task');
    return (id && (await store.get(id))) || undefined;
  };

  const generateTask = () =>
    store.create({
      tenant: TENANT,
      kind: 'tool',
      model: TOOLS_MODEL,
      onRestart: 'retry',
      request: { tool: 'generate', arguments: { model: 'tiny-chat', input: 'Hello', max_output_tokens: 4 } },
    });

  /** Starts one attempt of the tool task: claimed (its lease `leaseMs`) and run by the runner. */
  const startAttempt = async (id: string, worker: string, leaseMs: number) => {
    const task = await store.claim(id, worker, leaseMs, { start: true });
    const abort = new AbortController();
    const run = runner.run({ task, attempt: task.attempt, signal: abort.signal, store });
    return { attempt: task.attempt, abort, run };
  };

  /** Plays the worker of the child generation: it completes with `text`. */
  const completeChild = async (child: TaskRecord, text: string) => {
    const { attempt } = await store.claim(child.id, 'w-child', 60_000, { start: true });
    await store.finish(child.id, attempt, {
      status: 'succeeded',
      result: {
        status: 'completed',
        output: [{ type: 'message', content: [{ type: 'output_text', text }] }],
        usage: { input_tokens: 1, output_tokens: 2, total_tokens: 3 },
      },
    });
  };

  const textOf = (finish: Awaited<ToolRunner['run'] extends (...a: never[]) => infer R ? R : never>) => {
    assert.equal(finish.status, 'succeeded', JSON.stringify(finish));
    const result = (finish as { result: { content: { text: string }[] } }).result;
    return result.content[0]!.text;
  };

  it('lease lost: attempt 2 takes the same child, attempt 1 aborts, the child still completes attempt 2', async () => {
    const parent = await generateTask();
    const first = await startAttempt(parent.id, 'w-1', 200);
    const child = await until('the child generation', () => childOf(parent.id));
    // Attempt 1's lease lapses (its worker paused); recovery queues attempt 2 (on_restart retry).
    await until('the lease to lapse and the task to be queued again', async () =>
      (await store.recover(parent.id)) === 'queued' ? true : undefined,
    );
    const second = await startAttempt(parent.id, 'w-2', 60_000);
    // Attempt 2 replays the same step: the same child, not a second generation.
    await until('attempt 2 to reach the child', async () =>
      (await store.get(parent.id))?.attempt === 2 ? true : undefined,
    );
    // Attempt 1 learns it lost the task and stops.
    first.abort.abort('lost');
    await first.run;
    await completeChild(child, 'the child text');
    assert.equal(textOf(await second.run), 'the child text');
    assert.equal((await store.get(child.id))?.status, 'succeeded');
  });

  it('drain past its deadline: the handed-back task finds its child still running', async () => {
    const parent = await generateTask();
    const first = await startAttempt(parent.id, 'w-drain', 60_000);
    const child = await until('the child generation', () => childOf(parent.id));
    // The drain deadline passes: the attempt is stopped, then restarted under on_restart (as the worker does).
    first.abort.abort('drain');
    await first.run;
    await store.restart(parent.id, first.attempt);
    const second = await startAttempt(parent.id, 'w-next', 60_000);
    await completeChild(child, 'kept across the drain');
    assert.equal(textOf(await second.run), 'kept across the drain');
  });

  it("the task's own cancel still cancels its running child", async () => {
    const parent = await generateTask();
    const first = await startAttempt(parent.id, 'w-cancel', 60_000);
    const child = await until('the child generation', () => childOf(parent.id));
    assert.equal((await store.cancel(parent.id, TENANT)).outcome, 'cancelling');
    first.abort.abort('cancel');
    assert.equal((await first.run).status, 'cancelled');
    await until('the child to be cancelled', async () =>
      (await store.get(child.id))?.status === 'cancelled' ? true : undefined,
    );
  });
});
