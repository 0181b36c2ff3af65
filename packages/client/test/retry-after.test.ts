/**
 * A server (or a proxy in front of it) whose `Retry-After` is longer than the client waits: the
 * client gives up at once with an error that says when to try again, instead of sleeping for it.
 * Real HTTP: a plain server standing in for such a proxy; the injected clock records every wait.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { LmspClient, McpTasksClient, TasklineClientError, type Clock } from '../src/index.js';

describe('Retry-After past the maximum the client waits', () => {
  let server: Server;
  let base = '';
  let requests = 0;
  let retryAfter = '86400';
  let quietGets = 0;
  let lateStreams = 0;
  let lateEnded = false;
  const sse = (seq: number, type: string) =>
    `id: ${seq}\nevent: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq })}\n\n`;
  before(async () => {
    server = createServer((req, res) => {
      requests++;
      req.resume();
      if (req.url === '/mcp') {
        // MCP's "rate limited" (-32005), as Taskline sends it.
        res.writeHead(429, { 'content-type': 'application/json', 'retry-after': retryAfter });
        const data = { code: 'rate_limited', retryAfter: Number(retryAfter) };
        res.end(
          JSON.stringify({ jsonrpc: '2.0', id: 1, error: { code: -32005, message: 'Rate limited', data } }),
        );
        return;
      }
      if (req.url === '/lmsp/v1/tasks/task_quiet/events') {
        // Once the task has ended with nothing more to send: 204, as Taskline answers.
        if (quietGets > 2) return void res.writeHead(204).end();
        // A stream that asks for a day between reconnects, then closes with nothing to say.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end('retry: 86400000\n\n');
        return;
      }
      if (req.url === '/lmsp/v1/tasks/task_late/events') {
        // Its first event; then a connection closed with nothing, the task ending just after the
        // close; then, resumed, the events it wrote as it ended.
        const resumedAt = Number(req.headers['last-event-id'] ?? 0);
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        if (resumedAt === 0) res.end(sse(1, 'response.created'));
        else if (lateStreams++ === 0) res.end(': keep-alive\n\n', () => (lateEnded = true));
        else res.end(sse(2, 'response.output_text.delta') + sse(3, 'response.completed'));
        return;
      }
      if (req.url === '/lmsp/v1/tasks/task_late') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ id: 'task_late', status: lateEnded ? 'succeeded' : 'running' }));
        return;
      }
      if (req.url === '/lmsp/v1/tasks/task_quiet') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ id: 'task_quiet', status: ++quietGets > 2 ? 'succeeded' : 'queued' }));
        return;
      }
      if (req.url === '/lmsp/v1/tasks/task_dated') {
        // An HTTP-date a day past the reply's own Date (RFC 9110 section 10.2.3), by a server
        // whose clock is not the client's.
        res.writeHead(503, {
          'content-type': 'text/plain',
          date: 'Sun, 06 Nov 1994 08:49:37 GMT',
          'retry-after': 'Mon, 07 Nov 1994 08:49:37 GMT',
        });
        res.end('Service Unavailable');
        return;
      }
      res.writeHead(503, { 'content-type': 'text/plain', 'retry-after': retryAfter });
      res.end('Service Unavailable');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  /** Waits recorded, not slept: a client that sleeps through Retry-After shows it here. */
  const recording = () => {
    const sleeps: number[] = [];
    const clock: Clock = {
      now: () => Date.parse('2030-01-01T00:00:00Z'),
      sleep: async (ms) => void sleeps.push(ms),
    };
    return { sleeps, clock };
  };

  /** The error names the time to retry, as an absolute time and as a wait. */
  const saysWhen = (err: unknown, code: string) => {
    assert.ok(err instanceof TasklineClientError, String(err));
    assert.equal(err.code, code);
    assert.match(err.message, /retry after 86400 s/i);
    assert.match(err.message, /2030-01-02T00:00:00Z/);
    assert.match(err.message, /120 s/);
    return true;
  };

  test('LMSP requests give up at once, saying when to retry, and never sleep through it', async () => {
    retryAfter = '86400';
    requests = 0;
    const { sleeps, clock } = recording();
    const client = new LmspClient({ baseUrl: base, apiKey: 'k', clock });
    await assert.rejects(client.getTask('task_x'), (err) => saysWhen(err, 'http_503'));
    assert.deepEqual(sleeps, []);
    assert.equal(requests, 1, "one request: another try is the caller's, after the time it was given");
  });

  test("a Retry-After given as an HTTP-date counts from the reply's Date, not the client's clock", async () => {
    requests = 0;
    const { sleeps, clock } = recording();
    const client = new LmspClient({ baseUrl: base, apiKey: 'k', clock });
    await assert.rejects(client.getTask('task_dated'), (err) => saysWhen(err, 'http_503'));
    assert.deepEqual(sleeps, []);
    assert.equal(requests, 1);
  });

  test('an event stream refused with such a Retry-After gives up the same way', async () => {
    retryAfter = '86400';
    const { sleeps, clock } = recording();
    const client = new LmspClient({ baseUrl: base, apiKey: 'k', clock });
    await assert.rejects(
      (async () => {
        for await (const _ of client.stream('task_x')) void _;
      })(),
      (err) => saysWhen(err, 'http_503'),
    );
    assert.deepEqual(
      sleeps.filter((ms) => ms > 120_000),
      [],
    );
  });

  test('MCP task methods give up at once the same way', async () => {
    retryAfter = '86400';
    requests = 0;
    const { sleeps, clock } = recording();
    const client = new McpTasksClient({ url: `${base}/mcp`, apiKey: 'k', clock });
    await assert.rejects(client.getTask('t1'), (err) => saysWhen(err, 'rpc_error'));
    assert.deepEqual(sleeps, []);
    assert.equal(requests, 1);
  });

  test('a Retry-After up to the maximum is waited out; the maximum is an option', async () => {
    retryAfter = '120';
    const waited = recording();
    const client = new LmspClient({ baseUrl: base, apiKey: 'k', clock: waited.clock, maxAttempts: 2 });
    await assert.rejects(client.getTask('task_x'), (err) => (err as TasklineClientError).code === 'http_503');
    assert.deepEqual(waited.sleeps, [120_000]);

    retryAfter = '5';
    const strict = recording();
    const short = new LmspClient({ baseUrl: base, apiKey: 'k', clock: strict.clock, maxRetryAfterS: 2 });
    await assert.rejects(short.getTask('task_x'), /retry after 5 s.*longer than the 2 s/i);
    assert.deepEqual(strict.sleeps, []);
  });

  test('a stream closed without news just before its task ended is resumed, not taken as delivered', async () => {
    const { clock } = recording();
    const client = new LmspClient({ baseUrl: base, apiKey: 'k', clock });
    const types: string[] = [];
    for await (const event of client.stream('task_late')) types.push(event.type);
    assert.deepEqual(types, ['response.created', 'response.output_text.delta', 'response.completed']);
  });

  test("a stream's retry: hint past the maximum is cut to it: the stream goes on", async () => {
    const { sleeps, clock } = recording();
    const client = new LmspClient({ baseUrl: base, apiKey: 'k', clock });
    for await (const _ of client.stream('task_quiet')) void _;
    assert.deepEqual(sleeps, [120_000, 120_000]);
  });
});
