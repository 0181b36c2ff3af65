/**
 * The official `openai` npm SDK (pinned) on stored responses: `responses.retrieve` with
 * `include`, against an in-process api whose worker the test plays on the real engine.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import OpenAI, { BadRequestError } from 'openai';
import type { ResponseIncludable } from 'openai/resources/responses/responses';
import {
  call,
  KEY_A,
  nextQueued,
  runWorker,
  type InProcessApi,
  type Stack,
  useStackWithApi,
} from './helpers.js';

let stack: Stack;
let api: InProcessApi;
useStackWithApi((s, a) => ([stack, api] = [s, a]));

const sdk = (key = KEY_A) =>
  new OpenAI({ apiKey: key, baseURL: `${api.base}/lmsp/v1`, maxRetries: 0, timeout: 60_000 });
const BODY = { model: 'tiny-chat', input: 'Hi', background: true } as const;

/** A background response of tenant A, played to `completed` by the test's worker. */
async function completed(client: OpenAI): Promise<OpenAI.Responses.Response> {
  const created = await client.responses.create(BODY);
  await runWorker(stack.worker, await nextQueued(stack.redis), ['Hel', 'lo']);
  const done = await client.responses.retrieve(created.id);
  assert.equal(done.status, 'completed');
  return done;
}

/** A 400 `invalid_request` naming `include`, whose message says why. */
const refusedInclude = (why: RegExp) => (err: unknown) => {
  assert.ok(err instanceof BadRequestError, String(err));
  assert.equal(err.code, 'invalid_request');
  assert.equal(err.param, 'include');
  assert.equal(err.type, 'invalid_request_error');
  assert.match(err.message, why);
  return true;
};

/** Data of items no response here has (tools, images, reasoning): nothing to add, so honoured. */
const NOTHING_TO_ADD: ResponseIncludable[] = [
  'file_search_call.results',
  'web_search_call.results',
  'web_search_call.action.sources',
  'message.input_image.image_url',
  'computer_call_output.output.image_url',
  'code_interpreter_call.outputs',
  'reasoning.encrypted_content',
];

describe('responses.retrieve with include', () => {
  test('values naming data no response here has are honoured: the response as it is, streamed too', async () => {
    const client = sdk();
    const done = await completed(client);
    assert.deepEqual(await client.responses.retrieve(done.id, { include: NOTHING_TO_ADD }), done);
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    const stream = await client.responses.retrieve(done.id, {
      include: ['reasoning.encrypted_content'],
      stream: true,
      starting_after: 0,
    });
    for await (const e of stream) events.push(e);
    assert.equal(events.at(-1)!.type, 'response.completed');
    // A create accepts them as well, and the input items list.
    const bg = await client.responses.create({ ...BODY, include: ['reasoning.encrypted_content'] });
    assert.equal(bg.status, 'queued');
    // Off the queue, so the next test's worker plays its own response.
    assert.equal((await client.responses.cancel(bg.id)).status, 'cancelled');
    const items = await client.responses.inputItems.list(done.id, { include: NOTHING_TO_ADD });
    assert.equal(items.data.length, 1);
  });

  test('log probabilities cannot be given, and an unknown value is unknown: 400 naming include', async () => {
    const client = sdk();
    const done = await completed(client);
    const logprobs: ResponseIncludable[] = ['message.output_text.logprobs'];
    await assert.rejects(
      client.responses.retrieve(done.id, { include: logprobs }),
      refusedInclude(/log probabilities/),
    );
    await assert.rejects(
      client.responses.retrieve(done.id, { include: logprobs, stream: true }),
      refusedInclude(/log probabilities/),
    );
    await assert.rejects(
      client.responses.create({ ...BODY, include: logprobs }),
      refusedInclude(/log probabilities/),
    );
    const unknown = ['reasoning.encrypted_content', 'output.nope'] as ResponseIncludable[];
    await assert.rejects(
      client.responses.retrieve(done.id, { include: unknown }),
      refusedInclude(/output\.nope/),
    );
    await assert.rejects(
      client.responses.create({ ...BODY, include: unknown }),
      refusedInclude(/output\.nope/),
    );
    await assert.rejects(
      client.responses.inputItems.list(done.id, { include: unknown }),
      refusedInclude(/output\.nope/),
    );
    // Sent without brackets, once or repeated, as other clients write a list.
    for (const query of ['include=output.nope', 'include=reasoning.encrypted_content&include=output.nope']) {
      const r = await call(api.base, 'GET', `/lmsp/v1/responses/${done.id}?${query}`);
      assert.equal(r.status, 400, query);
      assert.equal((r.body as { error: { param: string } }).error.param, 'include', query);
    }
    const plain = await call(
      api.base,
      'GET',
      `/lmsp/v1/responses/${done.id}?include=reasoning.encrypted_content`,
    );
    assert.equal(plain.status, 200, plain.text);
  });
});
