/* eslint-disable @typescript-eslint/no-explicit-any -- MCP task snapshots are checked field by field */
/**
 * Tool tasks and the capacity they hold, on the real stack (Redis with AOF, scheduler, a gpu-worker
 * with 2 slots per queue, api processes serving `/mcp`; the tenants' running cap is 2):
 * - a task waiting for its caller's input holds no worker slot (it is parked), so unanswered
 *   confirmations never stop other tool calls, and an answer resumes it under a new attempt;
 * - a parent waiting for its child generation never starves it of a place in the running cap;
 * - child generations are part of their accepted tool call: the tenant's unfinished-task cap
 *   (TASKLINE_MAX_UNFINISHED_TASKS) counts the call once, never its children.
 */
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { idempotencyKey, schedulerKeys } from '@taskline/engine/keys';
import { startApi, startMcpStack, type Replica } from '@taskline/test-support/mcp-stack';
import { pollTask, rpc } from '@taskline/test-support/mcp';

const TENANTS = { a: 'tenant-a', b: 'tenant-b', c: 'tenant-c', d: 'tenant-d' };
const keyOf = (tenant: string) => `key-${tenant}`;
const SLOTS = 2;
const ACCEPT = { confirm: { action: 'accept', content: { proceed: true } } };

describe('tool tasks: worker slots and running places', () => {
  let stack: Awaited<ReturnType<typeof startMcpStack>>;
  let api: Replica;

  before(async () => {
    stack = await startMcpStack({
      env: {
        TASKLINE_API_KEYS: Object.values(TENANTS)
          .map((t) => `${t}:${keyOf(t)}`)
          .join(','),
        TASKLINE_TENANT_MAX_RUNNING: String(SLOTS),
      },
      workerEnv: { TASKLINE_WORKER_SLOTS: String(SLOTS), TASKLINE_BATCH_CONFIRM_ABOVE_TOKENS: '10' },
    });
    api = stack.replicas[0]!;
  });
  after(() => stack.stop());

  const start = async (tenant: string, name: string, args: Record<string, unknown>, url = api.url) => {
    const created = await rpc(url, 'tools/call', { name, arguments: args }, { token: keyOf(tenant) });
    assert.equal(created.message.result?.resultType, 'task', JSON.stringify(created.message));
    return created.message.result.taskId as string;
  };
  const poll = (tenant: string, taskId: string, done: (t: any) => boolean) =>
    pollTask(api.url, taskId, done, { token: keyOf(tenant) });
  const ended = (t: any) => ['completed', 'failed', 'cancelled'].includes(t.status);
  const generate = (tenant: string, url?: string) =>
    start(tenant, 'generate', { model: 'tiny-chat', input: 'Hello', max_output_tokens: 4 }, url);

  it('more unanswered confirmations than worker slots stop no other tool call', async () => {
    const batch = { model: 'tiny-chat', prompts: ['one two three'], max_output_tokens: 8 };
    const waiting: string[] = [];
    for (let i = 0; i < SLOTS + 1; i++) waiting.push(await start(TENANTS.a, 'batch_generate', batch));
    // Every one of them gets to ask, though only SLOTS run at a time: each asker lets its slot go.
    for (const id of waiting) {
      const t = await poll(TENANTS.a, id, (x) => x.status === 'input_required' || ended(x));
      assert.equal(t.status, 'input_required', JSON.stringify(t));
    }
    const record = await stack.cluster.store.get(waiting[0]!);
    assert.equal(record?.leaseOwner, null, 'a task waiting for input holds no lease');
    assert.equal(await stack.cluster.store.parkedCount(), SLOTS + 1);
    // Another tenant's tool call, and the same tenant's, run meanwhile.
    for (const tenant of [TENANTS.b, TENANTS.a]) {
      const id = await generate(tenant);
      const t = await poll(tenant, id, ended);
      assert.equal(t.status, 'completed', JSON.stringify(t));
    }
    // An answer resumes its task under a new attempt, which replays it and runs the batch.
    const answered = waiting[1]!;
    const ack = await rpc(
      api.url,
      'tasks/update',
      { taskId: answered, inputResponses: ACCEPT },
      { token: keyOf(TENANTS.a) },
    );
    assert.equal(ack.message.result?.resultType, 'complete', JSON.stringify(ack.message));
    const done = await poll(TENANTS.a, answered, ended);
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.equal(done.result.structuredContent.results.length, 1);
    assert.ok((await stack.cluster.store.get(answered))!.attempt >= 2, 'a new attempt ran after the answer');
    const statuses = (await stack.cluster.events(answered)).map((e) => e.task_status).filter(Boolean);
    const asked = statuses.indexOf('input_required');
    assert.ok(
      !statuses.slice(asked).some((s) => s === 'queued' || s === 'loading'),
      `the status stepped back after the question: ${statuses.join(',')}`,
    );
    // The others still wait, parked; cancelling them ends them at once.
    for (const id of [waiting[0]!, waiting[2]!]) {
      await rpc(api.url, 'tasks/cancel', { taskId: id }, { token: keyOf(TENANTS.a) });
      assert.equal((await poll(TENANTS.a, id, ended)).status, 'cancelled');
    }
    assert.equal(await stack.cluster.store.parkedCount(), 0);
  });

  it('as many parents as the running cap all finish: their children are never starved of a place', async () => {
    const parents = await Promise.all(Array.from({ length: SLOTS }, () => generate(TENANTS.c)));
    for (const id of parents) {
      const t = await poll(TENANTS.c, id, ended);
      assert.equal(t.status, 'completed', JSON.stringify(t));
    }
    // Nothing is left counted against the tenant once they ended.
    assert.equal(await stack.cluster.store.redis.zcard(schedulerKeys.active(TENANTS.c)), 0);
  });

  it('child generations are part of their tool call: the unfinished-task cap counts the call once', async () => {
    // An api replica whose tenants may each have one unfinished task: the tool call takes it.
    const capped = await startApi(stack.cluster, { TASKLINE_MAX_UNFINISHED_TASKS: '1' });
    const id = await generate(TENANTS.d, capped.url);
    const t = await poll(TENANTS.d, id, ended);
    assert.equal(t.status, 'completed', JSON.stringify(t));
    const hash = createHash('sha256').update(`tool:${id}:0`).digest('hex');
    const child = await stack.cluster.store.redis.hget(idempotencyKey(TENANTS.d, hash), 'task');
    assert.equal((await stack.cluster.store.get(child!))?.status, 'succeeded');
  });
});
