/**
 * The official `openai` npm SDK (pinned) against two real api replicas on one Redis, with a real
 * scheduler and gpu-worker running the bundled model: Taskline as a drop-in Responses API,
 * background responses included.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI, { BadRequestError, NotFoundError } from 'openai';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { EngineStack, LONG, until } from '@taskline/test-support/engine-stack';
import { KEY_A, spawnApi, type ApiProcess } from './helpers.js';

let cluster: EngineStack;
let a: ApiProcess;
let b: ApiProcess;

const sdk = (api: ApiProcess) =>
  new OpenAI({ apiKey: KEY_A, baseURL: `${api.base}/lmsp/v1`, maxRetries: 0, timeout: 60_000 });
const SHORT = { model: 'tiny-chat', max_output_tokens: 24, seed: 3 } as const;
/** A generation of seconds (the worker steps at most every 20 ms): long enough to cancel or cut. */
const SLOW = { ...LONG, input: [{ role: 'user' as const, content: LONG.input }] };
const FINAL = ['response.completed', 'response.incomplete', 'response.failed', 'response.cancelled'];
const taskIdOf = (responseId: string) => `task_${responseId.slice('resp_'.length)}`;

async function lmspTask(api: ApiProcess, id: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${api.base}/lmsp/v1/tasks/${id}`, {
    headers: { authorization: `Bearer ${KEY_A}` },
  });
  assert.equal(res.status, 200, `task ${id} on the LMSP route`);
  return (await res.json()) as Record<string, unknown>;
}

/** Every lifecycle event carries the response it stands for, and LMSP's own fields stay. */
function checkEvents(events: ResponseStreamEvent[], responseId: string, firstSeq = 1): void {
  assert.deepEqual(
    events.map((e) => e.sequence_number),
    events.map((_, i) => firstSeq + i),
    'every event once, in order',
  );
  for (const e of events) {
    assert.equal(typeof (e as unknown as { task_status: unknown }).task_status, 'string', e.type);
    if (e.type === 'response.created' || e.type === 'response.in_progress' || FINAL.includes(e.type)) {
      const response = (e as unknown as { response: { id: string; object: string } }).response;
      assert.equal(response?.id, responseId, `${e.type} carries its response`);
      assert.equal(response.object, 'response');
    }
  }
}

const deltas = (events: ResponseStreamEvent[]) =>
  events.map((e) => (e.type === 'response.output_text.delta' ? e.delta : '')).join('');

before(async () => {
  cluster = await EngineStack.start();
  cluster.startWorker({ TASKLINE_WORKER_MIN_STEP_MS: '20' });
  [a, b] = await Promise.all([spawnApi(cluster.redis.url), spawnApi(cluster.redis.url)]);
});
after(async () => {
  for (const api of [a, b]) {
    api.child.kill('SIGKILL');
    await api.exited;
  }
  await cluster.stop();
});

describe('the openai SDK against two api replicas', () => {
  test('models.list lists the served models; models.retrieve reads one, an unknown one is 404', async () => {
    const ids = [];
    for await (const model of sdk(a).models.list()) ids.push(model.id);
    assert.deepEqual(ids.sort(), ['plain-chat', 'tiny-chat']);
    const one = await sdk(b).models.retrieve('tiny-chat');
    assert.equal(one.id, 'tiny-chat');
    assert.equal(one.object, 'model');
    await assert.rejects(sdk(a).models.retrieve('gpt-nope'), NotFoundError);
  });

  test('responses.create: message items without type, instructions and ignored parameters; the LMSP task routes see it', async () => {
    const response = await sdk(a).responses.create({
      ...SHORT,
      instructions: 'Answer briefly.',
      input: [{ role: 'user', content: 'Hello' }],
      // Accepted (the response is kept for the task retention like every response), as apps that
      // send it by default must work unchanged.
      store: false,
      user: 'user-1',
      parallel_tool_calls: false,
      truncation: 'disabled',
      metadata: { run: 'sdk-test' },
      tools: [],
      text: { format: { type: 'text' } },
    });
    assert.ok(['completed', 'incomplete'].includes(response.status!), response.status);
    assert.ok(response.id.startsWith('resp_'), "response.id.startsWith('resp_')");
    assert.ok(response.output_text.length > 0, 'the SDK finds the output text');
    const task = await lmspTask(b, taskIdOf(response.id));
    assert.equal(task.status, 'succeeded');
    assert.equal(task.response_id, response.id);
    // The conversation goes on with the previous output sent back as input, as SDK users do.
    const next = await sdk(b).responses.create({
      ...SHORT,
      input: [
        { role: 'user', content: 'Hello' },
        ...(response.output as OpenAI.Responses.ResponseInputItem[]),
        { role: 'user', content: 'And then?' },
      ],
    });
    assert.ok(next.output_text.length > 0, 'next.output_text.length > 0');
  });

  test('responses.create with stream: true: lifecycle events carry the response, deltas add up', async () => {
    const stream = await sdk(b).responses.create({
      ...SHORT,
      input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hi' }] }],
      stream: true,
    });
    const events: ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    assert.equal(events[0]?.type, 'response.created');
    const last = events.at(-1)!;
    assert.ok(last.type === 'response.completed' || last.type === 'response.incomplete', last.type);
    checkEvents(events, last.response.id);
    assert.ok(
      events.some((e) => e.type === 'response.in_progress'),
      "events.some((e) => e.type === 'response.in_progress')",
    );
    assert.equal(deltas(events), outputText(last.response));
  });

  test('responses.stream helper: events and finalResponse()', async () => {
    let text = '';
    const stream = sdk(a)
      .responses.stream({ ...SHORT, input: 'Tell me about the sea.' })
      .on('response.output_text.delta', (e) => (text += e.delta));
    const final = await stream.finalResponse();
    assert.ok(['completed', 'incomplete'].includes(final.status!), final.status);
    assert.ok(text.length > 0, 'text.length > 0');
    assert.equal(final.output_text, text);
  });

  test('background: create answers at once with the queued response; retrieve on the other replica polls it to the end', async () => {
    const created = await sdk(a).responses.create({ ...SHORT, input: 'Write a line.', background: true });
    assert.equal(created.status, 'queued');
    assert.deepEqual(created.output, []);
    const done = await until('the background response to end', async () => {
      const r = await sdk(b).responses.retrieve(created.id);
      return ['completed', 'incomplete'].includes(r.status!) ? r : undefined;
    });
    assert.equal(done.id, created.id);
    assert.ok(done.output_text.length > 0, 'done.output_text.length > 0');
    assert.equal((await lmspTask(a, taskIdOf(created.id))).status, 'succeeded');
  });

  test('background: cancel on the other replica ends it cancelled', async () => {
    const created = await sdk(a).responses.create({ ...SLOW, background: true });
    await until('the response to run', async () => {
      const task = await lmspTask(b, taskIdOf(created.id));
      return task.status === 'running' || undefined;
    });
    const cancelled = await sdk(b).responses.cancel(created.id);
    assert.ok(['in_progress', 'cancelled'].includes(cancelled.status!), cancelled.status);
    await until('the response to be cancelled', async () => {
      const r = await sdk(a).responses.retrieve(created.id);
      return r.status === 'cancelled' || undefined;
    });
    assert.equal((await lmspTask(a, taskIdOf(created.id))).status, 'cancelled');
  });

  test('refused: unknown model, oversized max_output_tokens, malformed input, parameters that cannot be honoured', async () => {
    const client = sdk(a);
    const refused = async (
      body: Record<string, unknown>,
      type: typeof BadRequestError | typeof NotFoundError,
      code: string,
      param: string,
      says: RegExp,
    ) => {
      await assert.rejects(
        client.responses.create(body as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming),
        (err: unknown) => {
          assert.ok(err instanceof type, `${String(err)} is a ${type.name}`);
          assert.equal(err.code, code);
          assert.equal(err.param, param);
          assert.match(err.message, says);
          assert.ok(err.requestID, 'the request id reaches the SDK');
          return true;
        },
      );
    };
    await refused(
      { model: 'no-such-model', input: 'Hi' },
      NotFoundError,
      'model_not_found',
      'model',
      /no-such-model/,
    );
    await refused(
      { model: 'tiny-chat', input: 'Hi', max_output_tokens: 10_000_000 },
      BadRequestError,
      'invalid_request',
      'max_output_tokens',
      /max_output_tokens: at most \d+/,
    );
    await refused(
      { model: 'tiny-chat', input: [{ role: 'user', content: 42 }] },
      BadRequestError,
      'invalid_request',
      // OpenAI's form of the path; the problem's own `param` and `errors` keep LMSP's dotted one.
      'input[0].content',
      /input\.0\.content/,
    );
    await refused(
      { model: 'tiny-chat', input: 'Hi', tools: [{ type: 'function', name: 'f', parameters: {} }] },
      BadRequestError,
      'invalid_request',
      'tools',
      /tools is not supported/,
    );
    await refused(
      { model: 'tiny-chat', input: 'Hi', previous_response_id: 'resp_x' },
      BadRequestError,
      'invalid_request',
      'previous_response_id',
      /previous_response_id is not supported/,
    );
    // Background mode needs storage (OpenAI refuses it without, too).
    await refused(
      { model: 'tiny-chat', input: 'Hi', store: false, background: true },
      BadRequestError,
      'invalid_request',
      'store',
      /background mode keeps the response/,
    );
    await refused(
      { model: 'tiny-chat', input: 'Hi', modalities: ['audio'] },
      BadRequestError,
      'invalid_request',
      'modalities',
      /modalities/,
    );
    // The typed errors of the other routes too: an unknown response.
    await assert.rejects(sdk(b).responses.retrieve('resp_0000000000000000000000000z'), (err: unknown) => {
      assert.ok(err instanceof NotFoundError && err.code === 'task_not_found', String(err));
      return true;
    });
  });

  test('a failed response reads as OpenAI reports one: error.code and error.message, also in a stream', async () => {
    // Longer than tiny-chat's 256-token context: the task fails as invalid_request.
    const input = 'The sea is wide and deep. '.repeat(60);
    const failed = await sdk(a).responses.create({ ...SHORT, input });
    assert.equal(failed.status, 'failed');
    assert.equal(failed.error?.code, 'invalid_request');
    assert.match(failed.error?.message ?? '', /context of 256/);
    // The SDK turns the failed event's error into an APIError: its message is the error's text.
    await assert.rejects(
      async () => {
        for await (const _ of await sdk(b).responses.create({ ...SHORT, input, stream: true }));
      },
      (err: Error) => /context of 256/.test(err.message) && !err.message.includes('{'),
    );
  });

  test('LMSP clients still get problem+json; the OpenAPI document is served without credentials', async () => {
    const res = await fetch(`${a.base}/lmsp/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'no-such-model', input: 'Hi' }),
    });
    assert.equal(res.status, 404);
    assert.equal(res.headers.get('content-type'), 'application/problem+json; charset=utf-8');
    const problem = (await res.json()) as Record<string, unknown>;
    assert.equal(problem.code, 'model_not_found');
    assert.equal(problem.status, 404);
    assert.equal(problem.param, 'model');
    const doc = await fetch(`${b.base}/lmsp/v1/openapi.json`);
    assert.equal(doc.status, 200);
    const paths = ((await doc.json()) as { paths: Record<string, unknown> }).paths;
    for (const path of ['/lmsp/v1/responses/{id}', '/lmsp/v1/responses/{id}/cancel'])
      assert.ok(paths[path], path);
  });

  // Last: it kills replica a.
  test('background stream: resumed with starting_after (retrieve) after a replica kill and a disconnect, every event once', async () => {
    const events: ResponseStreamEvent[] = [];
    // Part 1: created as a streamed background response on replica a, which is killed mid-stream.
    const first = await sdk(a).responses.create({ ...SLOW, background: true, stream: true });
    try {
      for await (const event of first) {
        events.push(event);
        if (events.length === 6) a.child.kill('SIGKILL');
      }
      assert.fail('the stream ended normally although its replica was killed');
    } catch (err) {
      assert.ok(!(err instanceof assert.AssertionError), String(err));
    }
    await a.exited;
    assert.ok(events.length >= 6, 'events.length >= 6');
    assert.equal(events[0]?.type, 'response.created');
    const created = (events[0] as OpenAI.Responses.ResponseCreatedEvent).response;
    assert.equal(created.status, 'queued');

    // Part 2 from replica b, left by the reader (a disconnect).
    const second = await sdk(b).responses.retrieve(created.id, {
      stream: true,
      starting_after: events.at(-1)!.sequence_number,
    });
    let part = 0;
    for await (const event of second) {
      events.push(event);
      if (++part === 5) break;
    }
    assert.ok(!FINAL.includes(events.at(-1)!.type), 'the disconnect came before the end');

    // Part 3: resumed again, to the final event.
    const third = await sdk(b).responses.retrieve(created.id, {
      stream: true,
      starting_after: events.at(-1)!.sequence_number,
    });
    for await (const event of third) events.push(event);

    assert.equal(events[0]?.type, 'response.created');
    checkEvents(events, created.id);
    assert.deepEqual(
      events.filter((e) => FINAL.includes(e.type)).map((e) => e.type),
      [events.at(-1)!.type],
      'one final event, last',
    );
    const final = await sdk(b).responses.retrieve(created.id);
    assert.ok(['completed', 'incomplete'].includes(final.status!), final.status);
    assert.equal(deltas(events), final.output_text);
  });
});

function outputText(response: { output: unknown[] }): string {
  return (response.output as { content?: { text?: string }[] }[])
    .flatMap((item) => item.content ?? [])
    .map((part) => part.text ?? '')
    .join('');
}
