/**
 * The official `openai` npm SDK (pinned) reading streams from an in-process api whose worker the
 * test plays on the real engine, so a stream can be made as long, or as slow, as a test needs.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import OpenAI, { APIError } from 'openai';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import {
  completedResponse,
  delta,
  KEY_A,
  nextQueued,
  startApi,
  type InProcessApi,
  type RedisAndStore,
  useStackWithApi,
} from './helpers.js';

let stack: RedisAndStore;
let api: InProcessApi;
useStackWithApi((s, a) => ([stack, api] = [s, a]));

const sdk = (base = api.base) =>
  new OpenAI({ apiKey: KEY_A, baseURL: `${base}/lmsp/v1`, maxRetries: 0, timeout: 60_000 });
const BODY = { model: 'tiny-chat', input: 'Write a long report.' } as const;
const seqs = (events: ResponseStreamEvent[]) => events.map((e) => e.sequence_number);
const FINAL = ['response.completed', 'response.incomplete', 'response.failed', 'response.cancelled'];
const upTo = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

/** Plays the worker: claims the next queued task, streams `pieces`, and finishes it with `text`. */
async function play(pieces: string[], text = pieces.join('')): Promise<string> {
  const id = await nextQueued(stack.redis);
  const { attempt } = await stack.worker.claim(id, 'test-worker', 60_000);
  await stack.worker.start(id, attempt);
  for (const p of pieces) await stack.worker.append(id, attempt, [1], [delta(p)]);
  const task = (await stack.worker.get(id))!;
  await stack.worker.finish(id, attempt, { status: 'succeeded', result: completedResponse(task, text) });
  return id;
}

/**
 * Resumes a response's stream after its last event in `events` until the final one, as an SDK
 * user does on the `unavailable` error: each resume may be cut again (the history of a long
 * response is more than the test's small buffer), but never without progress.
 */
async function resumeToEnd(client: OpenAI, id: string, events: ResponseStreamEvent[]): Promise<void> {
  while (!FINAL.includes(events.at(-1)!.type)) {
    const before = events.length;
    try {
      const rest = await client.responses.retrieve(id, {
        stream: true,
        starting_after: events.at(-1)!.sequence_number,
      });
      for await (const e of rest) events.push(e);
    } catch (err) {
      if (!(err instanceof APIError && err.code === 'unavailable')) throw err;
    }
    assert.ok(events.length > before, 'each resume brings events');
  }
}

describe('openai SDK streams', () => {
  test('a stream: true create cut for a slow reader ends in an APIError naming where to resume, not a quiet end', async () => {
    const small = await startApi(stack, { TASKLINE_SSE_MAX_BUFFER_BYTES: '65536' });
    try {
      const client = sdk(small.base);
      const stream = await client.responses.create({ ...BODY, stream: true });
      const events: ResponseStreamEvent[] = [];
      await assert.rejects(
        async () => {
          for await (const e of stream) {
            // The reader stops after the first event while the whole response is written: far
            // more than the socket's buffers and the api's 64 KiB hold.
            if (events.push(e) === 1) await play(Array.from({ length: 400 }, () => 'x'.repeat(50_000)));
          }
        },
        (err: unknown) => {
          assert.ok(err instanceof APIError, String(err));
          assert.equal(err.code, 'unavailable');
          assert.match(err.message, new RegExp(`starting_after=${events.at(-1)!.sequence_number}\\.$`));
          // OpenAI's `error` stream event, numbered next after the last event sent.
          assert.deepEqual(err.error, {
            type: 'error',
            code: 'unavailable',
            message: (err.error as OpenAI.Responses.ResponseErrorEvent).message,
            param: null,
            sequence_number: events.at(-1)!.sequence_number + 1,
          });
          return true;
        },
      );
      assert.deepEqual(seqs(events), upTo(events.length), 'every event once, in order');
      const id = (events[0] as OpenAI.Responses.ResponseCreatedEvent).response.id;
      // The response ran on (the reader did not leave), and the rest is there to resume from,
      // on any replica (here one with the default buffer, which cuts a resume less often).
      await resumeToEnd(sdk(), id, events);
      assert.deepEqual(seqs(events), upTo(events.length), 'resumed: every event once, in order');
      assert.equal(events.at(-1)!.type, 'response.completed');
    } finally {
      await small.close();
    }
  });

  test('a slow reader whose stream already holds the final event gets it, and no error after it', async () => {
    const small = await startApi(stack, { TASKLINE_SSE_MAX_BUFFER_BYTES: '65536' });
    try {
      const stream = await sdk(small.base).responses.create({ ...BODY, stream: true });
      const events: ResponseStreamEvent[] = [];
      for await (const e of stream) {
        // The final event carries the whole output, far more than the buffers hold: the stream
        // is complete once it is written, however slowly it is read.
        if (events.push(e) === 1) await play(['a', 'b'], 'x'.repeat(8_000_000));
      }
      assert.deepEqual(seqs(events), upTo(events.length), 'every event once, in order');
      assert.equal(events.at(-1)!.type, 'response.completed');
    } finally {
      await small.close();
    }
  });
});
