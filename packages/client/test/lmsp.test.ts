import assert from 'node:assert/strict';
import { connect, createServer, type AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import {
  isFinalEvent,
  LmspClient,
  MemoryTaskIdStore,
  nextPollDelay,
  responseText,
  systemClock,
  TextAssembler,
  type Clock,
  type StreamEvent,
  type TaskStatus,
} from '../src/index.js';
import {
  KEY_A,
  LONG_INPUT,
  startClientStack,
  until,
  visibleStepViolation,
  type Stack,
} from '@taskline/test-support/client-stack';

describe('poll delays', () => {
  test('never below the interval, 10-20 % jitter on top, backing off only while nothing changes', () => {
    const policy = { intervalMs: 1000, backoff: 2, maxIntervalMs: 8000 };
    for (const random of [0, 0.5, 0.999999]) {
      for (let unchanged = 0; unchanged < 10; unchanged++) {
        const base = Math.min(1000 * 2 ** unchanged, 8000);
        const d = nextPollDelay(policy, unchanged, random);
        assert.ok(d >= base * 1.1 && d <= Math.ceil(base * 1.2), `${d} for base ${base}`);
      }
    }
    // The server's interval is a floor even when the client's own is shorter.
    assert.ok(
      nextPollDelay({ ...policy, intervalMs: 10 }, 0, 0, 500) >= 550,
      'nextPollDelay({ ...policy, intervalMs: 10 }, 0, 0, 500) >= 550',
    );
    // A cap below the server's interval never pulls a delay under it.
    assert.ok(
      nextPollDelay({ intervalMs: 10, backoff: 2, maxIntervalMs: 20 }, 5, 0, 500) >= 550,
      'nextPollDelay({ intervalMs: 10, backoff: 2, maxIntervalMs: 20 }, 5, 0, 500) >= 550',
    );
  });
});

describe('LMSP client against a running stack', () => {
  let stack: Stack;
  before(async () => {
    stack = await startClientStack();
  });
  after(async () => {
    await stack.stop();
  });
  const client = (extra: Partial<ConstructorParameters<typeof LmspClient>[0]> = {}) =>
    new LmspClient({ baseUrl: stack.base, apiKey: KEY_A, ...extra });

  test('a create whose reply is lost is retried under the same Idempotency-Key and makes one task', async () => {
    const keys: string[] = [];
    let lostReply: { id: string } | null = null;
    const flaky: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (init?.method === 'POST') {
        keys.push(new Headers(init.headers).get('idempotency-key')!);
        if (!lostReply) {
          // The server created the task; the reply never reaches the client.
          lostReply = (await res.json()) as { id: string };
          throw new TypeError('fetch failed', { cause: { code: 'ECONNRESET' } });
        }
      }
      return res;
    };
    const store = new MemoryTaskIdStore();
    const c = client({ fetch: flaky, store });
    const task = await c.createTask({
      type: 'response',
      input: { model: 'tiny-chat', input: 'Hi.', max_output_tokens: 2 },
    });
    assert.equal(keys.length, 2);
    assert.equal(keys[0], keys[1], 'the retry carries the same key');
    assert.equal(task.id, lostReply!.id, 'the retry got the task the lost reply named');
    assert.equal(store.get(keys[0]!, c.scope)?.taskId, task.id);
  });

  test('resume() finishes a create that a crash left unanswered, once, and follows it to its end', async () => {
    const store = new MemoryTaskIdStore();
    // What createTask writes before sending: the crash came before any reply.
    store.put({
      key: 'crash-key-1',
      protocol: 'lmsp',
      ...client().scope,
      taskId: null,
      request: { type: 'response', input: { model: 'tiny-chat', input: 'Hello.', max_output_tokens: 4 } },
      status: 'creating',
      lastEventId: 0,
      done: false,
      createdAt: 1,
      updatedAt: 1,
    });
    const first = await client({ store }).resume();
    assert.equal(first.length, 1);
    const created = first[0]!.task;
    assert.ok(created, 'the create went through');
    const resumed = client({ store });
    assert.equal((await resumed.resume())[0]!.task?.id, created.id);
    const final = await resumed.wait(created.id);
    assert.equal(final.status, 'succeeded');
    assert.deepEqual(store.unfinished(resumed.scope), [], 'a task seen terminal leaves nothing to resume');
  });

  test('a stream the caller stops reading resumes after the last event it got, not on it', async () => {
    const store = new MemoryTaskIdStore();
    const c = client({ store });
    const task = await c.createTask({
      type: 'response',
      input: { model: 'tiny-chat', input: 'Hi.', max_output_tokens: 8 },
    });
    const first: number[] = [];
    for await (const event of c.stream(task.id)) {
      first.push(event.sequence_number);
      if (first.length === 3) break;
    }
    const rest: number[] = [];
    for await (const event of c.stream(task.id)) rest.push(event.sequence_number);
    assert.deepEqual(
      [...first, ...rest],
      [...first, ...rest].map((_, i) => i + 1),
      'each event once',
    );
    // A final event the caller stopped on leaves nothing to resume.
    const again = client({ store });
    const t2 = await again.createTask({
      type: 'response',
      input: { model: 'tiny-chat', input: 'Hi.', max_output_tokens: 2 },
    });
    for await (const event of again.stream(t2.id)) if (event.type === 'response.completed') break;
    assert.deepEqual(
      store.unfinished(again.scope).map((e) => e.taskId),
      [],
      'a stream read to its final event closes the entry',
    );
  });

  test('a stream cut by killing the api replica resumes with Last-Event-ID without loss or repeats', async () => {
    const c = client({ store: new MemoryTaskIdStore() });
    const task = await c.createTask({ type: 'response', input: LONG_INPUT });
    const events: StreamEvent[] = [];
    let restarted = false;
    for await (const event of c.stream(task.id)) {
      events.push(event);
      if (!restarted && event.type === 'response.output_text.delta' && events.length >= 8) {
        restarted = true;
        await stack.restartApi();
      }
    }
    assert.ok(restarted, 'the replica was restarted mid-stream');
    assert.deepEqual(
      events.map((e) => e.sequence_number),
      events.map((_, i) => i + 1),
      'every sequence number once, in order',
    );
    const final = await c.getTask(task.id);
    assert.equal(final.status, 'succeeded');
    assert.equal(
      events.at(-1)!.type,
      final.response!.status === 'completed' ? 'response.completed' : 'response.incomplete',
    );
    const text = events
      .filter((e) => e.type === 'response.output_text.delta')
      .map((e) => e.delta)
      .join('');
    assert.equal(text, responseText(final.response));
    assert.ok(text.length > 0, 'text.length > 0');
  });

  test('a stream that a proxy keeps cutting while the task is quiet (queued) is followed, not given up', async () => {
    // A proxy that ends every event stream after two heartbeats, as one with a maximum stream
    // duration does: each connection is healthy, only quiet, and none counts as failing.
    let cuts = 0;
    const proxy = createServer((down) => {
      const up = connect(stack.port, '127.0.0.1');
      let beats = 0;
      let cut = false;
      up.on('data', (chunk: Buffer) => {
        const text = chunk.toString();
        // Counted per response: a kept-alive connection carries several.
        if (text.includes('HTTP/1.1 ')) beats = 0;
        beats += text.split(': keep-alive').length - 1;
        if (beats < 2) down.write(chunk);
        else {
          if (!cut) cuts++;
          cut = true;
          down.end(chunk, () => up.destroy());
        }
      });
      down.pipe(up);
      up.on('error', () => down.destroy());
      down.on('error', () => up.destroy());
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const via = client({
      baseUrl: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
      maxStreamReconnects: 2,
    });
    stack.worker.kill('SIGSTOP'); // the task stays queued, its stream quiet
    try {
      const task = await client().createTask({
        type: 'response',
        input: { model: 'tiny-chat', input: 'Hi.', max_output_tokens: 4 },
      });
      const events: StreamEvent[] = [];
      const reading = (async () => {
        for await (const event of via.stream(task.id)) events.push(event);
      })();
      // Each cut takes two heartbeats (200 ms each): counted, not timed, past maxStreamReconnects
      // while queued (a starved host may cut fewer times in a given while).
      await until('the stream cut more often than maxStreamReconnects', () => (cuts > 3 ? true : undefined));
      stack.worker.kill('SIGCONT');
      await reading;
      assert.ok(isFinalEvent(events.at(-1)!.type), events.at(-1)!.type);
    } finally {
      stack.worker.kill('SIGCONT');
      proxy.close();
    }
  });

  test('wait() polls no faster than the interval: every gap between its requests, seen by the server', async () => {
    const sleeps: number[] = [];
    const recording: Clock = {
      now: systemClock.now,
      sleep: (ms, s) => (sleeps.push(ms), systemClock.sleep(ms, s)),
    };
    const c = client({ clock: recording, poll: { intervalMs: 150, backoff: 1.5, maxIntervalMs: 600 } });
    const task = await c.createTask({ type: 'response', input: { ...LONG_INPUT, max_output_tokens: 60 } });
    const logsBefore = stack.api.logs.length;
    const final = await c.wait(task.id);
    assert.equal(final.status, 'succeeded');
    // The api logs each request when it closes, with its duration: its start is the line's time
    // less that. A request starts before its answer leaves, and the next one after the client's
    // wait, so starts are at least a wait apart however late a busy api logs a close.
    // Logged under the LMSP router, so the path is relative to /lmsp/v1.
    const path = `/tasks/${task.id}`;
    const polls = () =>
      stack.api.logs
        .slice(logsBefore)
        .filter((l) => l.msg === 'request' && l.method === 'GET' && String(l.path).endsWith(path))
        .map((l) => Date.parse(l.ts as string) - (l.ms as number));
    // One request per wait plus the first; the last log line may still be in the pipe.
    const times = await until('every poll in the api log', () =>
      polls().length >= sleeps.length + 1 ? polls() : undefined,
    );
    assert.ok(times.length >= 3, `${times.length} polls`);
    for (let i = 1; i < times.length; i++)
      assert.ok(times[i]! - times[i - 1]! >= 150, `gap ${i}: ${times[i]! - times[i - 1]!} ms`);
    assert.equal(sleeps.length, times.length - 1);
    for (const ms of sleeps) assert.ok(ms >= 165 && ms <= 720, `wait of ${ms} ms`);
  });

  for (const times of [1, 2]) {
    test(`stream() read through TextAssembler gives exactly the final text of a retry task interrupted ${times}x`, async () => {
      const c = client();
      const task = await c.createTask({
        type: 'response',
        input: LONG_INPUT,
        on_restart: 'retry',
      });
      const text = new TextAssembler();
      const seen: TaskStatus[] = [];
      let naive = '';
      const streamed = (async () => {
        for await (const event of c.stream(task.id)) {
          naive += text.push(event);
          if (event.task_status) seen.push(event.task_status as TaskStatus);
        }
      })();
      // A polling client alongside: GET never shows the task step back either.
      const polled: TaskStatus[] = [];
      let polling = true;
      const poller = (async () => {
        while (polling) {
          const { status } = await c.getTask(task.id);
          if (polled.at(-1) !== status) polled.push(status);
          await new Promise((r) => setTimeout(r, 10));
        }
      })();
      await stack.interrupt(task.id, times);
      await streamed;
      polling = false;
      await poller;
      const final = await c.getTask(task.id);
      assert.equal(final.status, 'succeeded');
      assert.equal(text.restarts, times, 'one restart event per interruption');
      assert.equal(text.text, responseText(final.response));
      // Without the restart event the deltas would not add up to the response.
      assert.notEqual(naive, text.text);
      assert.equal(visibleStepViolation(seen), null, seen.join(' '));
      assert.equal(visibleStepViolation(polled, true), null, polled.join(' '));
    });
  }
});
