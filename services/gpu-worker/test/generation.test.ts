import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { EngineStack, deltaText, outputText, until } from '@taskline/test-support/engine-stack';

let cluster: EngineStack;

before(async () => {
  // Two scheduler replicas, so that the last test can kill the leader.
  cluster = await EngineStack.start({ schedulers: 2 });
  cluster.startWorker({ TASKLINE_WORKER_MODELS: 'tiny-chat,instant' });
});

after(() => cluster.stop());

const run = (request: Record<string, unknown>, model = 'tiny-chat') => cluster.run(request, { model });

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
  assert.ok(
    ['response.completed', 'response.incomplete'].includes(tail[3]!),
    "['response.completed', 'response.incomplete'].includes(tail[3]!)",
  );
  const statuses = events.map((e) => e.task_status);
  assert.ok(
    statuses.includes('loading') && statuses.includes('running'),
    "statuses.includes('loading') && statuses.includes('running')",
  );
  const deltas = events.filter((e) => e.type === 'response.output_text.delta');
  assert.ok(deltas.length > 0, 'deltas.length > 0');
  const text = deltas.map((e) => e.delta).join('');
  const response = task.result as {
    output: { content: { text: string }[] }[];
    usage: { input_tokens: number; output_tokens: number; total_tokens: number };
  };
  assert.equal(response.output[0]!.content[0]!.text, text);
  assert.ok(
    response.usage.input_tokens > 0 && response.usage.output_tokens > 0,
    'response.usage.input_tokens > 0 && response.usage.output_tokens > 0',
  );
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

test("an input longer than the model's context fails the task as invalid_request, not internal_error", async () => {
  // tiny-chat has a context of 256 tokens; the model runs in its own thread, so the error crosses it.
  const { task } = await run({ input: 'The sea is wide and deep. '.repeat(60), max_output_tokens: 8 });
  assert.equal(task.status, 'failed');
  const error = task.error as { code: string; status: number; detail: string };
  assert.equal(error.code, 'invalid_request', JSON.stringify(error));
  assert.equal(error.status, 400);
  assert.match(error.detail, /context of 256/);
});

test('a prompt that fills the context exactly is invalid_request; an output that reaches its end is incomplete', async () => {
  // "<|im_start|>user\n" + input + "<|im_end|>\n<|im_start|>assistant\n" is 8 tokens, " a" one.
  const full = await run({ input: ' a'.repeat(248), max_output_tokens: 100 });
  assert.equal(full.task.status, 'failed');
  assert.equal((full.task.error as { code: string }).code, 'invalid_request');
  assert.match((full.task.error as { detail: string }).detail, /prompt has 256 tokens.*context of 256/);

  const { task, events } = await run({ input: ' a'.repeat(244), max_output_tokens: 100 });
  assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
  const response = task.result as {
    status: string;
    incomplete_details: unknown;
    usage: { input_tokens: number; output_tokens: number; total_tokens: number };
  };
  assert.equal(response.status, 'incomplete');
  assert.deepEqual(response.incomplete_details, { reason: 'max_output_tokens' });
  assert.deepEqual(response.usage, {
    ...response.usage,
    input_tokens: 252,
    output_tokens: 4,
    total_tokens: 256,
  });
  assert.equal(deltaText(events), outputText(task.result));
});

test('the benchmark-only instant model runs through the same pipeline', async () => {
  const { task, events } = await run({ input: 'x' }, 'instant');
  assert.equal(task.status, 'succeeded');
  assert.equal((task.result as { usage: { output_tokens: number } }).usage.output_tokens, 16);
  // A generation that ends before its first append was sent writes all of its output with its
  // end: one delta, in the same step as the final event.
  const deltas = events.filter((e) => e.type === 'response.output_text.delta');
  assert.equal(deltas.length, 1);
  assert.equal(
    deltas[0]!.delta,
    'lorem ipsum dolor sit amet, consectetur adipiscing elit.lorem ipsum dolor sit amet,',
  );
  const types = events.map((e) => e.type);
  assert.deepEqual(types.slice(types.indexOf('response.output_text.delta')), [
    'response.output_text.delta',
    'response.output_text.done',
    'response.content_part.done',
    'response.output_item.done',
    'response.completed',
  ]);
});

test('SIGKILL of the leader scheduler: the standby takes over and tasks still run', async () => {
  const leader = await until(
    'a scheduler leader',
    async () => (await cluster.store.redis.get('tl:{sched}:leader')) ?? undefined,
  );
  const port = Number(leader.slice(leader.lastIndexOf(':') + 1));
  const victim = cluster.schedulers.get(port);
  assert.ok(victim, `leader ${leader} is none of ours`);
  victim.kill('SIGKILL');
  const { task } = await run({ input: 'After the failover.', seed: 3, max_output_tokens: 8 });
  assert.equal(task.status, 'succeeded');
  const now = await cluster.store.redis.get('tl:{sched}:leader');
  assert.ok(now && now !== leader, 'the standby did not take the lead');
});
