/**
 * A stream opened with a JWT ends when the token stops being accepted (`exp` plus
 * TASKLINE_JWT_CLOCK_TOLERANCE_S, 0 here), each as its protocol ends one: LMSP's and the console's
 * with a problem as their last `error` event, the OpenAI surface's with OpenAI's `error` event,
 * an MCP listen by closing. A key's stream opened alongside goes on. Real HTTP, real SSE.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { exportSPKI, generateKeyPair, SignJWT } from 'jose';
import { until } from '@taskline/testing';
import {
  call,
  KEY_A,
  openSse,
  startApi,
  startRedisAndStore,
  TASK_BODY,
  type InProcessApi,
  type SseRead,
  type RedisAndStore,
} from './helpers.js';
import { listen, openTasks } from './listen.js';

let stack: RedisAndStore;
let api: InProcessApi;
let privateKey: CryptoKey;

before(async () => {
  stack = await startRedisAndStore();
  const keys = await generateKeyPair('ES256', { extractable: true });
  privateKey = keys.privateKey;
  api = await startApi(stack, {
    TASKLINE_JWT_PUBLIC_KEY: (await exportSPKI(keys.publicKey)).replace(/\n/g, '\\n'),
    TASKLINE_JWT_ISSUER: 'https://idp.test',
    TASKLINE_JWT_AUDIENCE: 'taskline',
    TASKLINE_JWT_CLOCK_TOLERANCE_S: '0',
    TASKLINE_JWT_ADMIN_ROLE: 'operator',
  });
});
after(async () => {
  await api.close();
  await stack.close();
});

/** A token for tenant-a (or an operator) that expires in 1 to 2 seconds. */
const shortLived = (claims: Record<string, unknown> = { tenant: 'tenant-a' }) =>
  new SignJWT(claims)
    .setProtectedHeader({ alg: 'ES256' })
    .setIssuer('https://idp.test')
    .setAudience('taskline')
    .setSubject('alice')
    .setExpirationTime(Math.floor(Date.now() / 1000) + 2)
    .sign(privateKey);

/**
 * What `open` opens with a fresh short-lived token, once the server accepted every stream of it.
 * The token lives 1 to 2 s: on a starved host it may run out before the server reads it (a 401 at
 * the open, which says nothing of how an open stream ends); the opens are then made again with a
 * new token, a few times at most.
 */
async function openedWithFreshToken<T extends { status: number }>(
  open: (token: string) => Promise<T[]>,
  leave: (opened: T) => void,
  claims?: Record<string, unknown>,
): Promise<T[]> {
  for (let tries = 1; ; tries++) {
    const opened = await open(await shortLived(claims));
    if (opened.every((o) => o.status === 200)) return opened;
    opened.forEach(leave);
    assert.ok(tries < 5, `a fresh token was refused: ${opened.map((o) => o.status).join(', ')}`);
  }
}

/** Whether `done` settles within a bound far beyond the token's life: the stream was closed by the server. */
const closedBy = (done: Promise<void>) =>
  Promise.race([done.then(() => true), new Promise<boolean>((r) => setTimeout(r, 15_000, false).unref())]);

/** A queued task of tenant-a (no worker runs here: its streams stay open on heartbeats). */
const queuedTask = async () =>
  (await call(api.base, 'POST', '/lmsp/v1/tasks', { key: KEY_A, body: TASK_BODY })).body as {
    id: string;
    events_url: string;
    response_id: string;
  };

/**
 * The stream's end as a key's stream alongside it sees it: still open, still sending heartbeats
 * (a heartbeat more than it had: one that ended would never send it, whatever the host's pace).
 */
async function stillOpen(read: SseRead): Promise<void> {
  const comments = read.comments;
  await until('the key-opened stream to send another heartbeat', () =>
    read.comments > comments ? true : undefined,
  );
  read.abort();
}

describe("a stream ends when the JWT that opened it expires; a key's goes on", () => {
  test('LMSP task events: a problem as the last `error` event, then the end', async () => {
    const task = await queuedTask();
    const [jwt] = await openedWithFreshToken(
      async (token) => [await openSse(api.base, task.events_url, { key: token })],
      (read) => read.abort(),
    );
    const key = await openSse(api.base, task.events_url);
    assert.equal(jwt!.status, 200);
    await jwt!.waitFor(1);
    assert.equal(await closedBy(jwt!.done), true, 'closed once the token expired');
    const last = jwt!.events.at(-1)!;
    assert.equal(last.event, 'error');
    assert.equal(last.data.code, 'unauthorized');
    assert.equal(last.data.status, 401);
    assert.equal(jwt!.retry, null);
    await stillOpen(key);
  });

  test("the OpenAI surface's response streams: OpenAI's `error` event, then the end", async () => {
    const task = await queuedTask();
    const reads = await openedWithFreshToken(
      async (token) => [
        await openSse(api.base, `/lmsp/v1/responses/${task.response_id}?stream=true`, { key: token }),
        await openSse(api.base, '/lmsp/v1/responses', {
          key: token,
          method: 'POST',
          body: { model: 'tiny-chat', input: 'Hi', stream: true },
        }),
      ],
      (read) => read.abort(),
    );
    for (const read of reads) {
      assert.equal(read.status, 200);
      assert.equal(await closedBy(read.done), true, 'closed once the token expired');
      const last = read.events.at(-1)!;
      assert.equal(last.event, 'error');
      assert.equal(last.data.type, 'error');
      assert.equal(last.data.code, 'unauthorized');
      assert.match(String(last.data.message), /expired/);
    }
  });

  test("the console's live views and task streams: a problem as the last `error` event", async () => {
    const task = await queuedTask();
    const reads = await openedWithFreshToken(
      async (token) => [
        await openSse(api.base, '/admin/v1/overview/events', { key: token }),
        await openSse(api.base, `/admin/v1/tasks/${task.id}/events`, { key: token }),
      ],
      (read) => read.abort(),
      { role: 'operator' },
    );
    for (const read of reads) {
      assert.equal(read.status, 200);
      assert.equal(await closedBy(read.done), true, 'closed once the token expired');
      const last = read.events.at(-1)!;
      assert.equal(last.event, 'error');
      assert.equal(last.data.code, 'unauthorized');
    }
  });

  test('an MCP listen is closed (the client listens again with a fresh token)', async () => {
    const [taskId] = await openTasks(stack, 1);
    const [jwt] = await openedWithFreshToken(
      async (token) => [await listen(api.base, [taskId], 7, token)],
      (opened) => opened.close(),
    );
    const key = await listen(api.base, [taskId]);
    assert.equal(jwt!.status, 200);
    assert.equal(await closedBy(jwt!.done), true, 'closed once the token expired');
    assert.ok(
      !jwt!.messages.some((m) => m.id === 7),
      'no listen result: the listen did not end, its stream did',
    );
    // A heartbeat more than it had: a listen that ended would never send it, whatever the host's pace.
    const comments = key.comments;
    await until('the key-opened listen to send another heartbeat', () =>
      key.comments > comments ? true : undefined,
    );
    key.close();
    await key.done;
  });
});
