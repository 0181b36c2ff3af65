/**
 * The official `openai` npm SDK (pinned) past the happy path, against a real api process with a
 * real scheduler and gpu-worker: the SDK's own retries, the response fields its types promise,
 * the endpoints Taskline does not serve, and following a background response by id.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI, { APIError, BadRequestError, ConflictError, NotFoundError } from 'openai';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { EngineStack, LONG, until } from '@taskline/test-support/engine-stack';
import { KEY_A, KEY_B, spawnApi, type ApiProcess } from './helpers.js';

let cluster: EngineStack;
let api: ApiProcess;
/** Tenant B's rate limit is low on this one (a replica of its own: the buckets are the tenant's). */
let limited: ApiProcess;

/** A client as users make one (the SDK's default retries), counting the requests it sends. */
function client(base = api.base, key = KEY_A, fetchFn: typeof fetch = fetch) {
  const sent: string[] = [];
  const sdk = new OpenAI({
    apiKey: key,
    baseURL: `${base}/lmsp/v1`,
    timeout: 60_000,
    fetch: (url, init) => {
      sent.push(`${init?.method ?? 'GET'} ${new URL(String(url)).pathname}`);
      return fetchFn(url, init);
    },
  });
  return { sdk, sent };
}
const SHORT = { model: 'tiny-chat', max_output_tokens: 24, seed: 3 } as const;

before(async () => {
  cluster = await EngineStack.start();
  cluster.startWorker({ TASKLINE_WORKER_MIN_STEP_MS: '20' });
  [api, limited] = await Promise.all([
    spawnApi(cluster.redis.url),
    spawnApi(cluster.redis.url, { TASKLINE_RATE_LIMIT_PER_S: '1', TASKLINE_RATE_LIMIT_BURST: '1' }),
  ]);
});
after(async () => {
  for (const p of [api, limited]) {
    p.child.kill('SIGKILL');
    await p.exited;
  }
  await cluster.stop();
});

/** What the SDK's `Response` type declares always present, beyond what the LMSP tests check. */
function checkTyped(response: OpenAI.Responses.Response): void {
  assert.deepEqual(response.tools, []);
  assert.equal(response.tool_choice, 'none');
  assert.equal(response.parallel_tool_calls, false);
  if (!response.usage) return;
  const { usage } = response;
  assert.equal(usage.total_tokens, usage.input_tokens + usage.output_tokens);
  assert.equal(usage.input_tokens_details.cached_tokens, 0);
  assert.equal(usage.input_tokens_details.cache_write_tokens, 0);
  assert.equal(usage.output_tokens_details.reasoning_tokens, 0);
}

describe('the openai SDK past the happy path', () => {
  test('max_output_tokens cuts a generation: incomplete, incomplete_details, usage as the SDK types it; also streamed', async () => {
    const { sdk } = client();
    const body = { model: 'tiny-chat', input: 'Tell me a long story.', max_output_tokens: 5, seed: 1 };
    const cut = await sdk.responses.create(body);
    assert.equal(cut.status, 'incomplete');
    assert.deepEqual(cut.incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(cut.usage?.output_tokens, 5);
    assert.ok(cut.output_text.length > 0, 'cut.output_text.length > 0');
    checkTyped(cut);
    const queued = await sdk.responses.create({ ...body, background: true });
    checkTyped(queued);
    const events: ResponseStreamEvent[] = [];
    for await (const e of await sdk.responses.create({ ...body, stream: true })) events.push(e);
    const last = events.at(-1)!;
    assert.equal(last.type, 'response.incomplete');
    checkTyped((last as OpenAI.Responses.ResponseIncompleteEvent).response);
    checkTyped((events[0] as OpenAI.Responses.ResponseCreatedEvent).response);
  });

  test('cancel: an ended response is a ConflictError at once, which the SDK does not retry', async () => {
    const { sdk, sent } = client();
    const done = await sdk.responses.create({ ...SHORT, input: 'Hi' });
    sent.length = 0;
    await assert.rejects(sdk.responses.cancel(done.id), (err: unknown) => {
      assert.ok(err instanceof ConflictError, String(err));
      assert.equal(err.code, 'task_not_cancelable');
      assert.equal(err.type, 'conflict_error');
      assert.ok(err.requestID, 'err.requestID');
      return true;
    });
    assert.deepEqual(sent, [`POST /lmsp/v1/responses/${done.id}/cancel`], 'one request, no retries');
    // A cancelled one answers itself again (cancel is idempotent), as OpenAI's does.
    const bg = await sdk.responses.create({ ...LONG, background: true });
    const first = await sdk.responses.cancel(bg.id);
    assert.ok(['in_progress', 'cancelled'].includes(first.status!), first.status);
    await until('the cancel to land', async () =>
      (await sdk.responses.retrieve(bg.id)).status === 'cancelled' ? true : undefined,
    );
    assert.equal((await sdk.responses.cancel(bg.id)).status, 'cancelled');
  });

  test('endpoints Taskline does not serve are clean OpenAI errors: 404, or 405 on a response’s own path', async () => {
    const { sdk, sent } = client();
    const done = await sdk.responses.create({ ...SHORT, input: 'Hi' });
    // A response’s own path takes GET and DELETE only.
    const ownPath = `/responses/${done.id}`;
    const openAiShaped = (status: 404 | 405) => (err: unknown) => {
      // A 404 is the SDK's NotFoundError; a 405 has no class of its own.
      assert.ok(err instanceof (status === 404 ? NotFoundError : APIError), String(err));
      assert.equal(err.status, status);
      assert.equal(err.type, status === 404 ? 'not_found_error' : 'invalid_request_error');
      assert.equal(err.code, 'invalid_request');
      assert.ok(err.requestID, 'err.requestID');
      return true;
    };
    sent.length = 0;
    await assert.rejects(
      sdk.responses.inputTokens.count({ model: 'tiny-chat', input: 'Hi' }),
      openAiShaped(404),
    );
    await assert.rejects(sdk.responses.compact({ model: 'tiny-chat' }), openAiShaped(404));
    await assert.rejects(
      sdk.chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'Hi' }] }),
      openAiShaped(404),
    );
    await assert.rejects(sdk.patch(ownPath), openAiShaped(405));
    // A path that names no response is no route at all, named as the client sent it.
    await assert.rejects(sdk.patch('/responses/nope'), (err: unknown) => {
      assert.ok(openAiShaped(404)(err), 'openAiShaped(404)(err)');
      assert.match((err as NotFoundError).message, /^404 No route PATCH \/lmsp\/v1\/responses\/nope\.$/);
      return true;
    });
    assert.equal(sent.length, 5, 'none retried');
  });

  test('responses.inputItems.list pages through the input: newest first, after, limit and order, as the SDK pages', async () => {
    const { sdk } = client();
    const input: OpenAI.Responses.ResponseInputItem[] = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: [{ type: 'input_text', text: 'One' }] },
      { role: 'assistant', content: 'Two' },
      { type: 'message', role: 'user', content: 'Three' },
    ];
    const bg = await sdk.responses.create({ ...SHORT, input, background: true });
    // Every item is a message; an assistant's text comes back as output_text, the others' as input_text.
    const texts = (items: OpenAI.Responses.ResponseItem[]) =>
      items.map((item) => {
        assert.equal(item.type, 'message');
        return item.content
          .map((c) => {
            assert.ok(c.type === 'input_text' || c.type === 'output_text', c.type);
            return c.text;
          })
          .join('');
      });
    // The SDK's auto-pagination follows `has_more` with `after` = the page's last id.
    const all: OpenAI.Responses.ResponseItem[] = [];
    for await (const item of sdk.responses.inputItems.list(bg.id, { limit: 1 })) all.push(item);
    assert.deepEqual(texts(all), ['Three', 'Two', 'One', 'Be brief.']);
    const first = await sdk.responses.inputItems.list(bg.id, { order: 'asc', limit: 2 });
    assert.deepEqual(texts(first.data), ['Be brief.', 'One']);
    assert.ok(first.has_more, 'first.has_more');
    const second = await first.getNextPage();
    assert.deepEqual(texts(second.data), ['Two', 'Three']);
    assert.equal(second.hasNextPage(), false);
    assert.deepEqual(first.data[1], {
      id: first.data[1]!.id,
      type: 'message',
      role: 'user',
      status: 'completed',
      content: [{ type: 'input_text', text: 'One' }],
    });
    assert.deepEqual((second.data[0] as OpenAI.Responses.ResponseOutputMessage).content, [
      { type: 'output_text', text: 'Two', annotations: [] },
    ]);
    // A string input is one user message.
    const plain = await sdk.responses.create({ ...SHORT, input: 'Hi', background: true });
    const only = await sdk.responses.inputItems.list(plain.id);
    assert.deepEqual(texts(only.data), ['Hi']);
    assert.equal((only.data[0] as OpenAI.Responses.ResponseInputMessageItem).role, 'user');
    const refused = (param: string) => (err: unknown) =>
      err instanceof BadRequestError && err.param === param && err.code === 'invalid_request';
    await assert.rejects(sdk.responses.inputItems.list(bg.id, { after: 'msg_nope' }), refused('after'));
    await assert.rejects(sdk.responses.inputItems.list(bg.id, { limit: 101 }), refused('limit'));
    await assert.rejects(
      sdk.responses.inputItems.list('resp_0000000000000000000000000z'),
      (err: unknown) => err instanceof NotFoundError && err.code === 'task_not_found',
    );
  });

  test('a create the SDK retries after a dropped connection makes one task when it carries an Idempotency-Key', async () => {
    let dropped = false;
    let firstId: string | undefined;
    // The connection drops after the server answered: the SDK sees a connection error and retries.
    const dropOnce: typeof fetch = async (url, init) => {
      const res = await fetch(url, init);
      if (dropped) return res;
      dropped = true;
      firstId = ((await res.json()) as { id: string }).id;
      throw new TypeError('fetch failed');
    };
    const { sdk, sent } = client(api.base, KEY_A, dropOnce);
    const created = await sdk.responses.create(
      { ...SHORT, input: 'Hi', background: true },
      { headers: { 'Idempotency-Key': 'oai-dropped-1' } },
    );
    assert.deepEqual(sent, ['POST /lmsp/v1/responses', 'POST /lmsp/v1/responses'], 'retried once');
    assert.equal(created.id, firstId, 'the retry answered the first task');
  });

  test('a 429 carries Retry-After, which the SDK waits out before its retry', async () => {
    const { sdk, sent } = client(limited.base, KEY_B);
    const start = Date.now();
    for (let i = 0; i < 3; i++) assert.equal((await sdk.models.retrieve('tiny-chat')).id, 'tiny-chat');
    assert.ok(sent.length > 3, `retried (${sent.length} requests)`);
    assert.ok(Date.now() - start >= 900, 'waited about the Retry-After second');
    const { sdk: once } = client(limited.base, KEY_B);
    const impatient = once.withOptions({ maxRetries: 0 });
    await assert.rejects(
      (async () => {
        for (;;) await impatient.models.retrieve('tiny-chat');
      })(),
      (err: unknown) =>
        err instanceof OpenAI.RateLimitError &&
        err.code === 'rate_limited' &&
        !!err.headers.get('retry-after'),
    );
  });

  test('a stream whose replica shuts down ends in an APIError naming where to resume, not a quiet end', async () => {
    // Both ways of following a background response: a streamed create, and retrieve with stream.
    for (const how of ['create', 'retrieve'] as const) {
      const doomed = await spawnApi(cluster.redis.url);
      const { sdk } = client(doomed.base);
      const followed =
        how === 'create'
          ? await sdk.responses.create({ ...LONG, background: true, stream: true })
          : await sdk.responses.retrieve((await sdk.responses.create({ ...LONG, background: true })).id, {
              stream: true,
            });
      const events: ResponseStreamEvent[] = [];
      await assert.rejects(
        async () => {
          for await (const e of followed) {
            events.push(e);
            if (events.length === 5) doomed.child.kill('SIGTERM');
          }
        },
        (err: unknown) => {
          assert.ok(err instanceof APIError, `${how}: ${String(err)}`);
          assert.equal(err.code, 'unavailable');
          assert.match(err.message, new RegExp(`starting_after=${events.at(-1)!.sequence_number}\\.$`));
          return true;
        },
      );
      await doomed.exited;
      const id = (events[0] as OpenAI.Responses.ResponseCreatedEvent).response.id;
      const rest = await client().sdk.responses.retrieve(id, {
        stream: true,
        starting_after: events.at(-1)!.sequence_number,
      });
      for await (const e of rest) events.push(e);
      assert.deepEqual(
        events.map((e) => e.sequence_number),
        events.map((_, i) => i + 1),
        `${how}: every event once`,
      );
      assert.ok(
        ['response.completed', 'response.incomplete'].includes(events.at(-1)!.type),
        "['response.completed', 'response.incomplete'].includes(events.at(-1)!.type)",
      );
    }
  });

  test('responses.stream({ response_id, starting_after }) follows a background response to finalResponse()', async () => {
    const { sdk } = client();
    const bg = await sdk.responses.create({ ...LONG, max_output_tokens: 40, background: true });
    let text = '';
    const stream = sdk.responses
      .stream({ response_id: bg.id, starting_after: 2 })
      .on('response.output_text.delta', (e) => (text += e.delta));
    const final = await stream.finalResponse();
    assert.equal(final.id, bg.id);
    assert.ok(['completed', 'incomplete'].includes(final.status!), final.status);
    assert.equal(final.output_text, text);
    assert.equal((await sdk.responses.retrieve(bg.id)).output_text, text);
  });
});
