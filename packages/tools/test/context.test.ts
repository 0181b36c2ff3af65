/**
 * What the runner hands a tool (`ToolContext`): the attempt, a stable idempotency key, the last
 * checkpoint under `resume` only, progress counts on the status event, a logger stamped with the
 * task, and a bounded checkpoint. Real Redis; the test plays the worker (claims, restarts).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { z } from 'zod';
import { startRedis, type RedisServer } from '@taskline/testing';
import { connectRedis, TaskStore, type OnRestart, type RunOutcome } from '@taskline/engine';
import {
  createToolRunner,
  defineTool,
  toolQueue,
  ToolRegistry,
  type RunnerLogger,
  type ToolContext,
} from '../src/index.js';

/** What the probe tool saw of its context, by call. */
const seen: Omit<
  ToolContext,
  'signal' | 'log' | 'progress' | 'checkpoint' | 'ask' | 'awaitCallback' | 'generate'
>[] = [];
const logged: Record<string, unknown>[] = [];

const probe = defineTool({
  name: 'probe',
  description: 'Reports its context, checkpoints `save`, reports progress.',
  inputSchema: z.object({ save: z.number(), big: z.boolean().default(false) }),
  taskSupport: 'optional',
  async run({ save, big }, ctx) {
    seen.push({
      taskId: ctx.taskId,
      tenant: ctx.tenant,
      attempt: ctx.attempt,
      resumed: ctx.resumed,
      idempotencyKey: ctx.idempotencyKey,
    });
    ctx.log.info('probing', { save });
    await ctx.progress('half way', { progress: 1, total: 2 });
    await ctx.checkpoint(big ? { blob: 'x'.repeat(2000) } : { save });
    return { content: [] };
  },
});

describe('the tool context', () => {
  let server: RedisServer;
  let store: TaskStore;
  /** A logger that records what it writes, with the fields its parents stamped. */
  const recording = (fields: Record<string, unknown>): RunnerLogger => ({
    info: (event, more) => void logged.push({ ...fields, event, ...more }),
    warn: () => undefined,
    error: () => undefined,
    child: (more) => recording({ ...fields, ...more }),
  });
  const logger = recording({});
  const runner = () =>
    createToolRunner(new ToolRegistry().register(probe, { queue: toolQueue('probe') }), {
      log: logger,
      checkpointMaxBytes: 1000,
    });

  before(async () => {
    server = await startRedis();
    store = new TaskStore(connectRedis(server.url, 'context-test'), {
      taskRetentionMs: 60_000,
      eventRetentionMs: 60_000,
      idempotencyTtlS: 86_400,
      idempotencyPendingMs: 30_000,
    });
  });
  after(async () => {
    store.redis.disconnect();
    await server.stop();
  });

  /** Runs attempt after attempt of a probe task (each interrupted but the last) with `onRestart`. */
  async function attempts(onRestart: OnRestart, saves: number[], big = false): Promise<RunOutcome[]> {
    const task = await store.create({
      tenant: 'tenant-c',
      kind: 'tool',
      model: toolQueue('probe'),
      onRestart,
      request: { tool: 'probe', arguments: { save: 0, big } },
    });
    const outcomes: RunOutcome[] = [];
    const r = runner();
    for (const [i, save] of saves.entries()) {
      if (i > 0) await store.restart(task.id, i, 'worker_lost');
      const claimed = await store.claim(task.id, 'w', 60_000, { start: true });
      // Each attempt's arguments name what it checkpoints (the runner reads the claimed record's request).
      outcomes.push(
        await r.run({
          task: { ...claimed, request: { tool: 'probe', arguments: { save, big } } },
          attempt: claimed.attempt,
          signal: new AbortController().signal,
          store,
        }),
      );
    }
    await r.close();
    return outcomes;
  }

  it('resume: the next attempt gets the last checkpoint; the key is the task id on every attempt', async () => {
    seen.length = 0;
    await attempts('resume', [1, 2]);
    assert.deepEqual(
      seen.map((s) => [s.attempt, s.resumed]),
      [
        [1, undefined],
        [2, { save: 1 }],
      ],
    );
    assert.equal(seen[0]!.idempotencyKey, seen[0]!.taskId);
    assert.equal(seen[1]!.idempotencyKey, seen[0]!.taskId);
    const counted = (await store.events(seen[0]!.taskId, 0)).events
      .map((e) => JSON.parse(e.data) as Record<string, unknown>)
      .find((d) => d.status_message === 'half way');
    assert.deepEqual([counted?.progress, counted?.total], [1, 2]);
    assert.deepEqual(logged.at(-1), {
      task: seen[0]!.taskId,
      tenant: 'tenant-c',
      tool: 'probe',
      attempt: 2,
      event: 'probing',
      save: 2,
    });
  });

  it('retry and fail: an attempt never sees an earlier checkpoint', async () => {
    seen.length = 0;
    await attempts('retry', [1, 2]);
    assert.deepEqual(
      seen.map((s) => s.resumed),
      [undefined, undefined],
    );
  });

  it('a checkpoint above the limit fails the call, naming the setting', async () => {
    const [outcome] = await attempts('resume', [1], true);
    assert.equal(outcome?.status, 'failed');
    assert.match(JSON.stringify(outcome), /above the limit of 1000 \(TASKLINE_TOOL_CHECKPOINT_MAX_BYTES\)/);
  });
});
