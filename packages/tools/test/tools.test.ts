/* eslint-disable @typescript-eslint/no-explicit-any -- MCP task snapshots are checked field by field */
/**
 * The built-in tools on the real stack: a Redis with AOF, the scheduler, gpu-worker processes with
 * the tiny model (they run the tool tasks from the `tools` queue and the child generations), and
 * an api process serving `/mcp`. Everything goes through MCP; the Redis is only read, for checks.
 */
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { idempotencyKey } from '@taskline/engine/keys';
import { exited } from '@taskline/testing';
import { startMcpStack, until, type Replica } from '@taskline/test-support/mcp-stack';
import { pollTask, rpc } from '@taskline/test-support/mcp';

const TENANT = 'tenant-a';
const KEY = 'key-a-secret';
/** Worker settings: a low confirmation threshold, and decode steps slow enough to interrupt. */
const WORKER_ENV = { TASKLINE_BATCH_CONFIRM_ABOVE_TOKENS: '10', TASKLINE_WORKER_MIN_STEP_MS: '40' };
const PROGRESS = /^\d+\/\d+ prompts done$/;
const ACCEPT = { confirm: { action: 'accept', content: { proceed: true } } };

describe('built-in tools run by gpu-workers', () => {
  let stack: Awaited<ReturnType<typeof startMcpStack>>;
  let api: Replica;

  before(async () => {
    stack = await startMcpStack({ env: { TASKLINE_API_KEYS: `${TENANT}:${KEY}` }, workerEnv: WORKER_ENV });
    api = stack.replicas[0]!;
  });
  after(() => stack.stop());

  const call = (method: string, params: Record<string, unknown>) =>
    rpc(api.url, method, params, { token: KEY });
  const start = async (name: string, args: Record<string, unknown>): Promise<string> => {
    const created = await call('tools/call', { name, arguments: args });
    assert.equal(created.message.result?.resultType, 'task', JSON.stringify(created.message));
    return created.message.result.taskId as string;
  };
  const poll = (taskId: string, done: (t: any) => boolean, seen?: (t: any) => void) =>
    pollTask(api.url, taskId, done, { token: KEY, seen });
  const ended = (t: any) => ['completed', 'failed', 'cancelled'].includes(t.status);
  /** The engine's record of the n-th generation a tool task started (created under (task, n)). */
  const child = async (taskId: string, n: number) => {
    const hash = createHash('sha256').update(`tool:${taskId}:${n}`).digest('hex');
    const id = await stack.cluster.store.redis.hget(idempotencyKey(TENANT, hash), 'task');
    return id ? stack.cluster.store.get(id) : null;
  };
  /** How many times the task entered input_required, from its event log. */
  const asked = async (taskId: string) =>
    (await stack.cluster.events(taskId)).filter((e) => e.task_status === 'input_required').length;

  it('generate returns the text, with usage in structuredContent', async () => {
    const taskId = await start('generate', { model: 'tiny-chat', input: 'Hello', max_output_tokens: 6 });
    const task = await poll(taskId, ended);
    assert.equal(task.status, 'completed', JSON.stringify(task));
    assert.equal(task.result.resultType, 'complete');
    const [text] = task.result.content;
    assert.equal(text.type, 'text');
    assert.equal(typeof text.text, 'string');
    const { usage, status } = task.result.structuredContent;
    assert.ok(['completed', 'incomplete'].includes(status), status);
    assert.ok(usage.output_tokens > 0 && usage.output_tokens <= 6, JSON.stringify(usage));
    assert.ok(usage.input_tokens > 0, 'usage.input_tokens > 0');
    assert.equal(usage.total_tokens, usage.input_tokens + usage.output_tokens);
    // The text is the child generation's own output.
    const generation = await child(taskId, 0);
    assert.equal(generation?.status, 'succeeded');
    const output = (generation!.result as any).output[0].content[0].text;
    assert.equal(text.text, output);
  });

  it('batch_generate under the threshold runs without asking', async () => {
    // Estimate: ceil(1 / 4) + 4 = 5 tokens, under the worker's threshold of 10.
    const taskId = await start('batch_generate', {
      model: 'tiny-chat',
      prompts: ['a'],
      max_output_tokens: 4,
    });
    const task = await poll(taskId, ended);
    assert.equal(task.status, 'completed', JSON.stringify(task));
    assert.equal(await asked(taskId), 0);
    assert.equal(task.result.structuredContent.estimated_cost, 5);
  });

  it('batch_generate over the threshold asks, resumes on tasks/update and shows progress as statusMessage', async () => {
    const prompts = ['Tell me a story.', 'Name a colour.'];
    const taskId = await start('batch_generate', { model: 'tiny-chat', prompts, max_output_tokens: 12 });
    const waiting = await poll(taskId, (t) => t.status === 'input_required' || ended(t));
    assert.equal(waiting.status, 'input_required', JSON.stringify(waiting));
    const { confirm } = waiting.inputRequests;
    assert.equal(confirm.method, 'elicitation/create');
    // 2 prompts of 4 estimated tokens plus 12 of output each, above the threshold of 10.
    assert.match(confirm.params.message, /2 prompts is estimated at 32 tokens \(your threshold is 10\)/);
    assert.equal(await child(taskId, 0), null, 'nothing is generated before the answer');

    const ack = await call('tasks/update', { taskId, inputResponses: ACCEPT });
    assert.equal(ack.message.result?.resultType, 'complete', JSON.stringify(ack.message));
    const messages = new Set<string>();
    const task = await poll(taskId, ended, (t) => t.statusMessage && messages.add(t.statusMessage));
    assert.equal(task.status, 'completed', JSON.stringify(task));
    assert.ok(
      [...messages].some((m) => PROGRESS.test(m)),
      `progress seen through tasks/get: ${[...messages].join(' | ')}`,
    );
    const { results, estimated_cost } = task.result.structuredContent;
    assert.equal(estimated_cost, 32);
    assert.deepEqual(
      results.map((r: any) => r.prompt),
      prompts,
    );
    assert.equal(await asked(taskId), 1);
  });

  it('batch_generate declined is not run: an isError result, the task completed', async () => {
    const taskId = await start('batch_generate', {
      model: 'tiny-chat',
      prompts: ['x', 'y'],
      max_output_tokens: 8,
    });
    await poll(taskId, (t) => t.status === 'input_required');
    await call('tasks/update', { taskId, inputResponses: { confirm: { action: 'decline' } } });
    const task = await poll(taskId, ended);
    assert.equal(task.status, 'completed');
    assert.equal(task.result.isError, true);
    assert.equal(await child(taskId, 0), null);
  });

  it('tasks/cancel reaches the tool as an abort: its running generation is cancelled, no next one starts', async () => {
    const taskId = await start('batch_generate', {
      model: 'tiny-chat',
      prompts: ['one', 'two', 'three'],
      max_output_tokens: 200,
    });
    await poll(taskId, (t) => t.status === 'input_required');
    await call('tasks/update', { taskId, inputResponses: ACCEPT });
    // The first generation is producing tokens: the tool is inside ctx.generate.
    const first = await until('the first generation to stream', async () => {
      const g = await child(taskId, 0);
      return g && (await stack.cluster.store.snapshot(g.id)).length > 0 ? g : undefined;
    });
    const ack = await call('tasks/cancel', { taskId });
    assert.equal(ack.message.result?.resultType, 'complete');
    const task = await poll(taskId, ended);
    assert.equal(task.status, 'cancelled', JSON.stringify(task));
    // The tool's abort handler cancelled its child, which would otherwise run its 200 tokens.
    const generation = await stack.cluster.waitForEnd(first.id);
    assert.equal(generation.status, 'cancelled');
    assert.equal(await child(taskId, 1), null, 'the tool stopped before the next prompt');
  });

  // Last: it kills the stack's first worker.
  it('replays answers instead of asking again when the task is retried after SIGKILL of its worker', async () => {
    const prompts = ['First prompt here.', 'Second prompt here.'];
    const taskId = await start('batch_generate', { model: 'tiny-chat', prompts, max_output_tokens: 40 });
    await poll(taskId, (t) => t.status === 'input_required');
    await call('tasks/update', { taskId, inputResponses: ACCEPT });
    // Mid-run: the first generation is streaming (40 steps of at least 40 ms each).
    await until('the first generation to stream', async () => {
      const g = await child(taskId, 0);
      return g && (await stack.cluster.store.snapshot(g.id)).length > 0 ? true : undefined;
    });
    const before = await stack.cluster.store.get(taskId);
    assert.equal(before?.status, 'running');
    stack.worker.kill('SIGKILL');
    await exited(stack.worker);
    stack.cluster.startWorker(WORKER_ENV);

    const statuses: string[] = [];
    const task = await poll(taskId, ended, (t) => statuses.push(t.status));
    assert.equal(task.status, 'completed', JSON.stringify(task));
    assert.ok(!statuses.includes('input_required'), `statuses after the kill: ${statuses.join(',')}`);
    const record = await stack.cluster.store.get(taskId);
    assert.ok(record!.attempt > before!.attempt, 'a second attempt ran the tool');
    assert.equal(await asked(taskId), 1, 'the confirmation was asked once over both attempts');
    assert.deepEqual(
      task.result.structuredContent.results.map((r: any) => r.prompt),
      prompts,
    );
  });
});
