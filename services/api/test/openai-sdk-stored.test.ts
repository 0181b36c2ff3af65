/**
 * The official `openai` npm SDK (pinned) on stored responses: `responses.retrieve` with
 * `include`, and `responses.delete`, against an in-process api whose worker the test plays on the real engine.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import OpenAI, { BadRequestError, ConflictError, NotFoundError } from 'openai';
import { scanKeys } from '@taskline/testing';
import type { ResponseIncludable } from 'openai/resources/responses/responses';
import {
  call,
  KEY_A,
  KEY_B,
  nextQueued,
  runWorker,
  type InProcessApi,
  type RedisAndStore,
  useStackWithApi,
} from './helpers.js';

let stack: RedisAndStore;
let api: InProcessApi;
useStackWithApi((s, a) => ([stack, api] = [s, a]));

const sdk = (key = KEY_A, options: Partial<ConstructorParameters<typeof OpenAI>[0]> = {}) =>
  new OpenAI({ apiKey: key, baseURL: `${api.base}/lmsp/v1`, maxRetries: 0, timeout: 60_000, ...options });
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

/** What every read of a deleted response gets: OpenAI's 404, as for one never made. */
const gone = (err: unknown) => {
  assert.ok(err instanceof NotFoundError, String(err));
  assert.equal(err.code, 'task_not_found');
  assert.equal(err.type, 'not_found_error');
  return true;
};

/** Every key of the task that produces response `id` (on every node of a cluster). */
const keysOf = (id: string) => scanKeys(stack.redis, `tl:{task_${id.slice('resp_'.length)}}:*`);

describe('responses.delete', () => {
  test('an ended response is deleted with every key of its task; every later read is 404', async () => {
    const client = sdk();
    const done = await completed(client);
    assert.ok((await keysOf(done.id)).length >= 2, 'the record and its events are stored');
    const { data, response } = await client.responses.delete(done.id).withResponse();
    assert.equal(response.status, 200);
    // OpenAI's answer (the SDK types it void, and returns the body as it comes).
    assert.deepEqual(data, { id: done.id, object: 'response', deleted: true });
    assert.deepEqual(await keysOf(done.id), []);
    await assert.rejects(client.responses.retrieve(done.id), gone);
    await assert.rejects(client.responses.retrieve(done.id, { stream: true, starting_after: 0 }), gone);
    await assert.rejects(client.responses.inputItems.list(done.id), gone);
    await assert.rejects(client.responses.cancel(done.id), gone);
    await assert.rejects(client.responses.delete(done.id), gone);
    const task = await call(api.base, 'GET', `/lmsp/v1/tasks/task_${done.id.slice('resp_'.length)}`);
    assert.equal(task.status, 404);
  });

  test("another tenant's delete is 404 and deletes nothing", async () => {
    const done = await completed(sdk());
    await assert.rejects(sdk(KEY_B).responses.delete(done.id), gone);
    assert.deepEqual(await sdk().responses.retrieve(done.id), done);
  });

  test('a response not ended is 409 task_not_deletable, which the SDK does not retry; cancelled, it deletes', async () => {
    const sent: string[] = [];
    // The SDK's default retries, which retry a 409 unless told not to.
    const client = sdk(KEY_A, {
      maxRetries: 2,
      fetch: (url, init) => {
        sent.push(`${init?.method ?? 'GET'} ${new URL(String(url)).pathname}`);
        return fetch(url, init);
      },
    });
    const notEnded = (status: string) => (err: unknown) => {
      assert.ok(err instanceof ConflictError, String(err));
      assert.equal(err.code, 'task_not_deletable');
      assert.match(err.message, new RegExp(`${status}.*cancel`));
      return true;
    };
    const queued = await client.responses.create(BODY);
    sent.length = 0;
    await assert.rejects(client.responses.delete(queued.id), notEnded('queued'));
    assert.deepEqual(sent, [`DELETE /lmsp/v1/responses/${queued.id}`], 'one request, no retries');
    const id = await nextQueued(stack.redis);
    const { attempt } = await stack.worker.claim(id, 'test-worker', 60_000);
    await stack.worker.start(id, attempt);
    await assert.rejects(client.responses.delete(queued.id), notEnded('running'));
    await client.responses.cancel(queued.id);
    await assert.rejects(client.responses.delete(queued.id), notEnded('cancelling'));
    await stack.worker.finish(id, attempt, { status: 'cancelled' });
    assert.equal((await client.responses.retrieve(queued.id)).status, 'cancelled');
    await client.responses.delete(queued.id);
    await assert.rejects(client.responses.retrieve(queued.id), gone);
    assert.deepEqual(await keysOf(queued.id), []);
  });

  test("a create retried with a deleted response's Idempotency-Key makes a new response, as after its retention", async () => {
    const client = sdk();
    const headers = { 'Idempotency-Key': 'stored-delete-1' };
    const first = await client.responses.create(BODY, { headers });
    assert.equal((await client.responses.create(BODY, { headers })).id, first.id, 'the same response');
    await client.responses.cancel(first.id);
    await client.responses.delete(first.id);
    const again = await client.responses.create(BODY, { headers });
    assert.notEqual(again.id, first.id);
    assert.equal(again.status, 'queued');
    await client.responses.cancel(again.id);
  });
});
