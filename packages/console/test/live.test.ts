/** The console's keyed live feeds over real HTTP: a feed lives only while someone reads it. */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import express, { type ErrorRequestHandler } from 'express';
import { TasklineError } from '@taskline/engine';
import { HTTP_STATUS } from '@taskline/lmsp';
import { FeedPool, type LiveStreams } from '../src/live.js';

let base = '';
let close: () => Promise<void>;
/** Whether the stream cap refuses now (429), as the api's `openStream` does at the cap. */
let capped = false;

before(async () => {
  const live: LiveStreams = {
    openStream: async () => {
      if (capped) throw new TasklineError('rate_limited', 'At the cap.');
      return { renew: async () => undefined, release: async () => undefined };
    },
    register: () => () => undefined,
    heartbeatMs: 60_000,
    retryMs: 1000,
    maxBufferBytes: 1 << 20,
  };
  const pool = new FeedPool('tasks', 60_000);
  const app = express();
  // Each request's read names the request: a stream shows whose read its feed was made with.
  app.get('/feeds/:key', (req, res) =>
    pool.serve(
      req,
      res,
      String(req.params.key),
      async () => ({ at: Date.now(), by: String(req.query.by) }),
      live,
      'operator',
    ),
  );
  const errors: ErrorRequestHandler = (err, _req, res, _next) => {
    res.status(err instanceof TasklineError ? HTTP_STATUS[err.code] : 500).end();
  };
  app.use(errors);
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  close = () => new Promise((resolve) => server.close(() => resolve()));
});
after(async () => {
  await close();
});

/**
 * Opens `key`'s stream as `by` (resumed from `lastEventId` if given): its first snapshot's `by` and
 * id, or null for none within `waitMs`, and a way to leave. By default a bound that catches a
 * snapshot that never comes, not a pace a starved host may miss.
 */
async function follow(
  key: string,
  by: string,
  lastEventId?: string,
  waitMs = 30_000,
): Promise<{ by: string | null; id: string | null; leave(): void }> {
  const leaving = new AbortController();
  const headers: Record<string, string> = lastEventId ? { 'Last-Event-ID': lastEventId } : {};
  const res = await fetch(`${base}/feeds/${key}?by=${by}`, { headers, signal: leaving.signal });
  assert.equal(res.status, 200);
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = '';
  const deadline = setTimeout(() => void reader.cancel(), waitMs);
  while (!text.includes('\n\n')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += value;
  }
  clearTimeout(deadline);
  const leave = () => leaving.abort();
  const data = /^data: (.*)$/m.exec(text)?.[1];
  if (data === undefined) return { by: null, id: null, leave };
  return { by: (JSON.parse(data) as { by: string }).by, id: /^id: (.*)$/m.exec(text)![1]!, leave };
}

test('a refused request leaves no feed behind: the next reader of its key gets a feed of its own', async () => {
  const head = await fetch(`${base}/feeds/head?by=refused`, { method: 'HEAD' });
  assert.equal(head.status, 200);
  const bad = await fetch(`${base}/feeds/bad?by=refused`, { headers: { 'Last-Event-ID': 'x' } });
  assert.equal(bad.status, 400);
  capped = true;
  const over = await fetch(`${base}/feeds/capped?by=refused`);
  capped = false;
  assert.equal(over.status, 429);
  for (const key of ['head', 'bad', 'capped']) {
    const reader = await follow(key, 'reader');
    assert.equal(reader.by, 'reader', `${key}: a feed made by a refused request was still kept`);
    reader.leave();
  }
});

test('readers of one key share its feed while any reads it; it goes with the last one', async () => {
  const first = await follow('shared', 'first');
  const second = await follow('shared', 'second');
  assert.equal(second.by, 'first', 'the second reader joins the open feed');
  first.leave();
  second.leave();
  // The server sees each reader leave a moment after it aborts.
  for (let i = 0; ; i++) {
    const third = await follow('shared', 'third');
    third.leave();
    if (third.by === 'third') break;
    assert.ok(i < 50, 'the feed outlived its last reader');
    await new Promise((r) => setTimeout(r, 20));
  }
});

test("a reader resumed from another replica's snapshot gets this one's at once, whichever clock is ahead", async () => {
  // Snapshot ids are each replica's clock: one resumed from a replica 20 s ahead still has an older state.
  for (const skew of [20_000, -20_000]) {
    const resumed = await follow('resumed', 'reader', String(Date.now() + skew));
    resumed.leave();
    assert.equal(resumed.by, 'reader', `resumed from a replica ${skew} ms ahead: no snapshot`);
  }
  // Resumed here from the snapshot the feed holds: nothing new to send until the next one.
  const first = await follow('held', 'first');
  const again = await follow('held', 'again', first.id!, 300);
  first.leave();
  again.leave();
  assert.equal(again.by, null, 'the snapshot the reader has was sent again');
});
