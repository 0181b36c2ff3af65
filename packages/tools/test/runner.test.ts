/**
 * The tool runner refuses, by itself, a generation the deployment would not run: whatever let the
 * tool task in (an api without the check, a tool building its own request), a child task for an
 * unknown model would stay queued forever and its parent would hang. Real Redis, no workers.
 */
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, type RedisServer } from '@taskline/testing';
import {
  connectRedis,
  servedModelsFromEnv,
  TaskStore,
  type RunOutcome,
  type TaskRecord,
} from '@taskline/engine';
import { idempotencyKey } from '@taskline/engine/keys';
import { builtinTools, createToolRunner, TOOLS_MODEL, type ToolRunner } from '../src/index.js';

const TENANT = 'tenant-r';
const CAP = 16;

describe('tool runner: generations outside the served models and output cap', () => {
  let server: RedisServer;
  let store: TaskStore;
  let runner: ToolRunner;

  before(async () => {
    server = await startRedis();
    store = new TaskStore(connectRedis(server.url, 'runner-test'), {
      taskRetentionMs: 60_000,
      eventRetentionMs: 60_000,
      idempotencyTtlS: 86_400,
      idempotencyPendingMs: 30_000,
    });
    const served = servedModelsFromEnv({
      TASKLINE_MODELS: 'tiny-chat',
      TASKLINE_SNAPSHOT_MODELS: '',
      TASKLINE_MAX_OUTPUT_TOKENS: CAP,
    });
    runner = createToolRunner(builtinTools({ batchConfirmAboveTokens: 1e9 }), {
      served,
    });
  });
  after(async () => {
    await runner.close();
    store.redis.disconnect();
    await server.stop();
  });

  /** The n-th generation the tool task started, created under (task, n). */
  const childOf = async (taskId: string): Promise<TaskRecord | null> => {
    const hash = createHash('sha256').update(`tool:${taskId}:0`).digest('hex');
    const id = await store.redis.hget(idempotencyKey(TENANT, hash), 'task');
    return id ? store.get(id) : null;
  };

  /**
   * Runs one `generate` tool task. No worker runs children here, so once a child exists the run is
   * aborted (a runner that made one would wait on it for ever); bounded either way.
   */
  const runGenerate = async (args: Record<string, unknown>) => {
    const task = await store.create({
      tenant: TENANT,
      kind: 'tool',
      model: TOOLS_MODEL,
      onRestart: 'retry',
      request: { tool: 'generate', arguments: args },
    });
    const abort = new AbortController();
    const run = runner.run({ task, attempt: 1, signal: abort.signal, store });
    const settled = run.then(
      () => true,
      () => true,
    );
    for (let i = 0; i < 400; i++) {
      if (await Promise.race([settled, sleep(25).then(() => false)])) break;
      if (await childOf(task.id)) break;
    }
    abort.abort();
    const finish: RunOutcome = await run;
    return { finish, child: await childOf(task.id) };
  };

  it('an unknown model fails the tool at once, with no child task', async () => {
    const { finish, child } = await runGenerate({ model: 'no-such-model', input: 'Hello' });
    assert.equal(finish.status, 'failed', JSON.stringify(finish));
    assert.equal(finish.status === 'failed' && finish.error.code, 'tool_failed');
    assert.match(JSON.stringify(finish), /does not serve the model \\"no-such-model\\"/);
    assert.equal(child, null);
  });

  it('max_output_tokens above the cap fails the tool, as LMSP refuses it', async () => {
    const { finish, child } = await runGenerate({
      model: 'tiny-chat',
      input: 'Hello',
      max_output_tokens: CAP + 1,
    });
    assert.equal(finish.status, 'failed', JSON.stringify(finish));
    assert.match(JSON.stringify(finish), new RegExp(`max_output_tokens: at most ${CAP}`));
    assert.equal(child, null);
  });

  it('a task whose tool or arguments no longer fit fails as a request of its caller, 400, not 500', async () => {
    const fail = async (request: Record<string, unknown>) => {
      const task = await store.create({
        tenant: TENANT,
        kind: 'tool',
        model: TOOLS_MODEL,
        onRestart: 'retry',
        request,
      });
      return runner.run({ task, attempt: 1, signal: new AbortController().signal, store });
    };
    for (const finish of [
      await fail({ tool: 'no_such_tool', arguments: {} }),
      await fail({ tool: 'generate', arguments: { input: 42 } }),
    ]) {
      assert.equal(finish.status, 'failed', JSON.stringify(finish));
      assert.deepEqual(finish.status === 'failed' && [finish.error.code, finish.error.status], [
        'invalid_request',
        400,
      ]);
    }
  });

  it('a served model without max_output_tokens gets the cap stored, as an LMSP create does', async () => {
    const { child } = await runGenerate({ model: 'tiny-chat', input: 'Hello' });
    assert.ok(child, 'the child generation was created');
    assert.equal((child.request as { max_output_tokens?: number }).max_output_tokens, CAP);
  });
});
