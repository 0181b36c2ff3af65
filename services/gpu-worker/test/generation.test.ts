import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { connectRedis, TaskStore, type TaskRecord } from '@taskline/engine';
import { freePort, startRedis, type RedisServer } from '@taskline/testing';

const root = fileURLToPath(new URL('../../../', import.meta.url));
let redis: RedisServer;
let store: TaskStore;
const procs: ChildProcess[] = [];

function spawnService(entry: string, env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  child.stdout?.resume();
  procs.push(child);
  return child;
}

async function waitFor(id: string, done: (t: TaskRecord) => boolean): Promise<TaskRecord> {
  for (;;) {
    const task = await store.get(id);
    if (task && done(task)) return task;
    await new Promise((r) => setTimeout(r, 50));
  }
}

const schedulers = new Map<number, ChildProcess>();
let controlPorts: number[] = [];

before(async () => {
  redis = await startRedis();
  controlPorts = [await freePort(), await freePort()];
  store = new TaskStore(connectRedis(redis.url, 'test'), {
    taskRetentionMs: 3_600_000,
    eventRetentionMs: 3_600_000,
    idempotencyTtlS: 86_400,
    idempotencyPendingMs: 30_000,
  });
  const common = { REDIS_URL: redis.url, TASKLINE_METRICS_PORT: '0', TASKLINE_LEASE_MS: '1000' };
  // Two scheduler replicas: one leads, the other stands by and redirects workers.
  for (const port of controlPorts) {
    schedulers.set(
      port,
      spawnService('services/scheduler/src/main.ts', {
        ...common,
        TASKLINE_CONTROL_PORT: String(port),
        TASKLINE_HEARTBEAT_MS: '100',
        TASKLINE_DISPATCH_INTERVAL_MS: '20',
        TASKLINE_LEADER_LEASE_MS: '1000',
      }),
    );
  }
  spawnService('services/gpu-worker/src/main.ts', {
    ...common,
    TASKLINE_SCHEDULER_ADDR: controlPorts.map((p) => `127.0.0.1:${p}`).join(','),
    TASKLINE_WORKER_MODELS: 'tiny-chat,instant',
    TASKLINE_WORKER_SLOTS: '2',
  });
});

after(async () => {
  for (const p of procs) p.kill('SIGKILL');
  store.redis.disconnect();
  await redis.stop();
});

async function run(request: Record<string, unknown>, model = 'tiny-chat') {
  const created = await store.create({
    tenant: 't1',
    kind: 'response',
    model,
    onRestart: 'fail',
    request: { model, ...request },
  });
  const task = await waitFor(created.id, (t) => ['succeeded', 'failed', 'cancelled'].includes(t.status));
  const { events } = await store.events(task.id, 0);
  return {
    task,
    events: events.map((e) => ({ type: e.type, ...(JSON.parse(e.data) as Record<string, unknown>) })),
  };
}

test('a worker process generates with the real model: events in order, output and usage', async () => {
  const { task, events } = await run({ input: 'Tell me about the sea.', seed: 7, max_output_tokens: 64 });
  assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
  const types = events
    .map((e) => e.type)
    .filter((t) => t !== 'response.in_progress' && t !== 'response.created');
  assert.equal(types[0], 'response.output_item.added');
  assert.equal(types[1], 'response.content_part.added');
  const tail = types.slice(-4);
  assert.deepEqual(tail.slice(0, 3), [
    'response.output_text.done',
    'response.content_part.done',
    'response.output_item.done',
  ]);
  assert.ok(['response.completed', 'response.incomplete'].includes(tail[3]!));
  const statuses = events.map((e) => e.task_status);
  assert.ok(statuses.includes('loading') && statuses.includes('running'));
  const deltas = events.filter((e) => e.type === 'response.output_text.delta');
  assert.ok(deltas.length > 0);
  const text = deltas.map((e) => e.delta).join('');
  const response = task.result as {
    output: { content: { text: string }[] }[];
    usage: Record<string, number>;
  };
  assert.equal(response.output[0]!.content[0]!.text, text);
  assert.ok(response.usage.input_tokens > 0 && response.usage.output_tokens > 0);
  assert.equal(response.usage.total_tokens, response.usage.input_tokens + response.usage.output_tokens);
  // Same seed, same request: same text (what `resume` relies on).
  const again = await run({ input: 'Tell me about the sea.', seed: 7, max_output_tokens: 64 });
  assert.equal((again.task.result as typeof response).output[0]!.content[0]!.text, text);
});

test('max_output_tokens ends the response incomplete while the task succeeds', async () => {
  const { task, events } = await run({
    input: [
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Tell me a long story.' }] },
    ],
    instructions: 'Be verbose.',
    max_output_tokens: 2,
    seed: 1,
  });
  assert.equal(task.status, 'succeeded');
  const response = task.result as {
    status: string;
    incomplete_details: unknown;
    usage: { output_tokens: number };
  };
  assert.equal(response.status, 'incomplete');
  assert.deepEqual(response.incomplete_details, { reason: 'max_output_tokens' });
  assert.equal(response.usage.output_tokens, 2);
  assert.equal(events.at(-1)!.type, 'response.incomplete');
});

test('the benchmark-only instant model runs through the same pipeline', async () => {
  const { task } = await run({ input: 'x' }, 'instant');
  assert.equal(task.status, 'succeeded');
  assert.equal((task.result as { usage: { output_tokens: number } }).usage.output_tokens, 16);
});

test('SIGKILL of the leader scheduler: the standby takes over and tasks still run', async () => {
  let leader: string | null = null;
  while (!leader) {
    leader = await store.redis.get('tl:{sched}:leader');
    await new Promise((r) => setTimeout(r, 50));
  }
  const port = Number(leader.slice(leader.lastIndexOf(':') + 1));
  const victim = schedulers.get(port);
  assert.ok(victim, `leader ${leader} is none of ours`);
  victim.kill('SIGKILL');
  const { task } = await run({ input: 'After the failover.', seed: 3, max_output_tokens: 8 });
  assert.equal(task.status, 'succeeded');
  const now = await store.redis.get('tl:{sched}:leader');
  assert.ok(now && now !== leader, 'the standby did not take the lead');
});
