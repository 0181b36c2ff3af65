import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startRedis, until } from '@taskline/testing';
import { hashKey } from '@taskline/auth';
import { connectRedis } from '@taskline/engine';
import {
  call,
  checkSse,
  completedResponse,
  delta,
  KEY_A,
  nextQueued,
  openSse,
  spawnApi,
  startRedisAndStore,
  TASK_BODY,
  type ApiProcess,
  type RedisAndStore,
} from './helpers.js';

/** An operator key, so that the replicas' logs show an operator's requests too. */
const ADMIN_KEY = 'admin-key-0123456789abcdef';

let stack: RedisAndStore;
before(async () => {
  stack = await startRedisAndStore();
});
after(async () => {
  await stack.close();
});

describe('two api processes on one Redis', () => {
  let a: ApiProcess;
  let b: ApiProcess;
  before(async () => {
    const env = { TASKLINE_ADMIN_KEYS: ADMIN_KEY };
    [a, b] = await Promise.all([spawnApi(stack.redisServer.url, env), spawnApi(stack.redisServer.url, env)]);
  });
  after(async () => {
    a.child.kill('SIGKILL');
    b.child.kill('SIGKILL');
    await Promise.all([a.exited, b.exited]);
  });

  test('a stream read half from one replica and resumed on the other with Last-Event-ID gets every event exactly once', async () => {
    const created = await call(a.base, 'POST', '/lmsp/v1/tasks', { body: TASK_BODY });
    const task = created.body as { id: string; events_url: string };
    const seenOnB = await call(b.base, 'GET', `/lmsp/v1/tasks/${task.id}`);
    assert.equal(seenOnB.status, 200, 'any replica serves any task');

    const { attempt } = await stack.worker.claim(task.id, 'w', 60_000);
    await stack.worker.start(task.id, attempt);
    for (const t of ['The ', 'first ', 'half ']) await stack.worker.append(task.id, attempt, [1], [delta(t)]);

    const first = await openSse(a.base, task.events_url);
    await first.waitFor(4);
    first.abort();
    await first.done;
    const cut = first.events.at(-1)!.id;

    // Events written while no one listens, then the resume on the other replica, then live ones.
    for (const t of ['and ', 'the ']) await stack.worker.append(task.id, attempt, [1], [delta(t)]);
    const second = await openSse(b.base, task.events_url, { headers: { 'last-event-id': cut } });
    assert.equal(second.status, 200);
    await second.waitFor(1);
    for (const t of ['second ', 'half.']) await stack.worker.append(task.id, attempt, [1], [delta(t)]);
    const full = (await stack.worker.get(task.id))!;
    await stack.worker.finish(task.id, attempt, {
      status: 'succeeded',
      result: completedResponse(full, 'x'),
    });
    await second.done;
    checkSse(b.base, 'GET', task.events_url, second);

    const all = [...first.events, ...second.events];
    const seqs = all.map((e) => Number(e.id));
    assert.deepEqual(
      seqs,
      Array.from({ length: full.seq + 1 }, (_, i) => i + 1),
      'every event exactly once, in order',
    );
    assert.equal(all[0]?.event, 'response.created');
    assert.equal(all.filter((e) => e.event.startsWith('response.completed')).length, 1);
    assert.equal(all.at(-1)?.event, 'response.completed');
    const text = all
      .filter((e) => e.event === 'response.output_text.delta')
      .map((e) => e.data.delta)
      .join('');
    assert.equal(text, 'The first half and the second half.');
  });

  test('concurrent creates with one Idempotency-Key, split across both replicas, make one task', async () => {
    const headers = { 'idempotency-key': 'across-replicas-1' };
    const replies = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        call(i % 2 ? b.base : a.base, 'POST', '/lmsp/v1/tasks', { body: TASK_BODY, headers }),
      ),
    );
    const ids = new Set(replies.filter((r) => r.status === 202).map((r) => (r.body as { id: string }).id));
    assert.equal(ids.size, 1, 'every accepted create on either replica names the same task');
    for (const r of replies.filter((x) => x.status !== 202)) {
      assert.equal(r.status, 409, r.text);
      assert.equal((r.body as { code: string }).code, 'idempotency_key_in_use');
    }
    // Once accepted, a retry on either replica gets that task; another body is refused on both.
    for (const base of [a.base, b.base]) {
      const again = await call(base, 'POST', '/lmsp/v1/tasks', { body: TASK_BODY, headers });
      assert.equal(again.status, 202, again.text);
      assert.equal((again.body as { id: string }).id, [...ids][0]);
      const other = await call(base, 'POST', '/lmsp/v1/tasks', {
        body: { ...TASK_BODY, on_restart: 'retry' },
        headers,
      });
      assert.equal(other.status, 422, other.text);
      assert.equal((other.body as { code: string }).code, 'idempotency_key_reused');
    }
  });

  test('JSON logs carry the request id, the path as asked and who asked: a tenant or an operator', async () => {
    const logged = async (path: string, key: string, id: string) => {
      const r = await call(a.base, 'GET', path, { key, headers: { 'x-request-id': id }, skipCheck: true });
      assert.equal(r.headers.get('x-request-id'), id);
      return until('the request log line', () =>
        a.logs.find((l) => l.msg === 'request' && l.request_id === id),
      );
    };
    const tenant = await logged('/lmsp/v1/models', KEY_A, 'trace-123');
    assert.deepEqual([tenant.path, tenant.status, tenant.tenant], ['/lmsp/v1/models', 200, 'tenant-a']);
    // An operator's request reads as one: its whole path (not LMSP's `/tasks/...` look-alike) and its id.
    const operator = await logged(`/admin/v1/tasks/${'task_' + '0'.repeat(26)}`, ADMIN_KEY, 'trace-op');
    assert.deepEqual(
      [operator.path, operator.status, operator.operator, operator.tenant],
      [`/admin/v1/tasks/task_${'0'.repeat(26)}`, 404, `key:${hashKey(ADMIN_KEY).slice(0, 12)}`, undefined],
    );
  });

  test('each replica serves Prometheus metrics on its metrics port, never on the api port', async () => {
    for (const replica of [a, b]) {
      const onApi = await call(replica.base, 'GET', '/metrics', { key: null });
      assert.equal(onApi.status, 404, 'the api port does not serve metrics');
      assert.doesNotMatch(onApi.text, /taskline_/);
      assert.notEqual(replica.metricsBase, replica.base);
    }
    const r = await call(b.metricsBase, 'GET', '/metrics', { key: null, skipCheck: true });
    assert.equal(r.status, 200);
    assert.match(r.text, /taskline_http_requests_total\{[^}]*route="\/lmsp\/v1\/tasks\/:id\/events"/);
    assert.match(r.text, /taskline_events_delivered_total\{[^}]*protocol="lmsp"[^}]*\} [1-9]/);
    const onA = await call(a.metricsBase, 'GET', '/metrics', { key: null, skipCheck: true });
    assert.match(
      onA.text,
      /taskline_task_creates_total\{[^}]*protocol="lmsp",tenant="tenant-a",outcome="accepted"[^}]*\} [1-9]/,
    );
  });
});

describe('graceful shutdown', () => {
  test('SIGTERM: streams end with a retry hint, in-flight requests finish, new connections are refused, exit 0', async () => {
    const api = await spawnApi(stack.redisServer.url, {
      TASKLINE_SHUTDOWN_DEADLINE_MS: '20000',
      TASKLINE_SSE_RETRY_MS: '1500',
    });
    const task = (await call(api.base, 'POST', '/lmsp/v1/tasks', { body: TASK_BODY })).body as {
      id: string;
      events_url: string;
    };
    const stream = await openSse(api.base, task.events_url);
    await stream.waitFor(1);
    await stack.redis.del('tl:{sched}:ready:tiny-chat:tenant-a');
    const sync = call(api.base, 'POST', '/lmsp/v1/responses', { body: { model: 'tiny-chat', input: 'hi' } });
    const responseTask = await nextQueued(stack.redis);

    api.child.kill('SIGTERM');
    await stream.done;
    assert.equal(stream.retry, 1500, 'the stream ended with a retry: hint');
    assert.equal((await stack.worker.get(task.id))?.status, 'queued', 'the task lives on');
    await assert.rejects(fetch(`${api.base}/healthz`), 'no new connections');

    const { attempt } = await stack.worker.claim(responseTask, 'w', 60_000);
    await stack.worker.start(responseTask, attempt);
    const t = (await stack.worker.get(responseTask))!;
    await stack.worker.finish(responseTask, attempt, {
      status: 'succeeded',
      result: completedResponse(t, 'bye'),
    });
    const done = await sync;
    assert.equal(done.status, 200, 'the in-flight response finished');
    assert.equal((done.body as { status: string }).status, 'completed');
    assert.equal(await api.exited, 0);
  });

  test('SIGTERM: what is still running at the deadline is cut, its response cancelled, and the process exits', async () => {
    const api = await spawnApi(stack.redisServer.url, { TASKLINE_SHUTDOWN_DEADLINE_MS: '300' });
    await stack.redis.del('tl:{sched}:ready:tiny-chat:tenant-a');
    const sync = call(api.base, 'POST', '/lmsp/v1/responses', {
      body: { model: 'tiny-chat', input: 'never answered' },
    }).catch((err: Error) => err);
    const id = await nextQueued(stack.redis);
    api.child.kill('SIGTERM');
    assert.equal(await api.exited, 0);
    assert.ok((await sync) instanceof Error, 'the connection was cut');
    assert.equal(
      (await stack.worker.get(id))?.status,
      'cancelled',
      'the caller is gone, so its response was cancelled',
    );
  });

  test('refuses a Redis without AOF unless TASKLINE_REQUIRE_AOF=false', async () => {
    const plain = await startRedis();
    const admin = connectRedis(plain.url, 'admin');
    await admin.config('SET', 'appendonly', 'no');
    try {
      await assert.rejects(spawnApi(plain.url), /exited with 1/);
      const api = await spawnApi(plain.url, { TASKLINE_REQUIRE_AOF: 'false' });
      assert.equal((await call(api.base, 'GET', '/readyz', { key: null })).status, 200);
      api.child.kill('SIGTERM');
      assert.equal(await api.exited, 0);
    } finally {
      admin.disconnect();
      await plain.stop();
    }
  });
});
