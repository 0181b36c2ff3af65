import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { exportJWK, exportSPKI, generateKeyPair, SignJWT } from 'jose';
import OpenAI, { APIError } from 'openai';
import { scanKeys, until } from '@taskline/testing';
import {
  call,
  KEY_A,
  nextQueued,
  openSse,
  runWorker,
  spawnApi,
  startApi,
  startRedisAndStore,
  TASK_BODY,
  type InProcessApi,
  type RedisAndStore,
} from './helpers.js';

let stack: RedisAndStore;
before(async () => {
  stack = await startRedisAndStore();
});
after(async () => {
  await stack.close();
});

/** The one `keys` command: the `taskline` CLI of `@taskline/cli`, its machine-readable output. */
const CLI = fileURLToPath(new URL('../../../packages/cli/bin/taskline.js', import.meta.url));
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const cli = async (...args: string[]) => {
  const { stdout } = await promisify(execFile)(process.execPath, [CLI, '--json', ...args], {
    cwd: ROOT,
    env: { ...process.env, REDIS_URL: stack.redisServer.url },
  });
  return stdout;
};

describe('API keys from the CLI', () => {
  let api: InProcessApi;
  before(async () => (api = await startApi(stack)));
  after(() => api.close());

  test('create, use, list and revoke; only the hash is stored', async () => {
    const created = JSON.parse(await cli('keys', 'create', '--tenant', 'tenant-cli', '--name', 'ci')) as {
      id: string;
      key: string;
    };
    const r = await call(api.base, 'POST', '/lmsp/v1/tasks', { key: created.key, body: TASK_BODY });
    assert.equal(r.status, 202);
    assert.equal((await stack.worker.get((r.body as { id: string }).id))?.tenant, 'tenant-cli');
    const listed = JSON.parse(await cli('keys', 'list', '--tenant', 'tenant-cli')) as { id: string }[];
    assert.deepEqual(
      listed.map((k) => k.id),
      [created.id],
    );
    assert.doesNotMatch(JSON.stringify(listed), new RegExp(created.key));
    const stored = await scanKeys(stack.redis, 'tl:{auth}:*');
    assert.ok(stored.length >= 2, 'the key store is where this test looks');
    for (const key of stored) {
      const dump = JSON.stringify(
        await (key === 'tl:{auth}:keys' ? stack.redis.hgetall(key) : stack.redis.get(key)),
      );
      assert.ok(!key.includes(created.key) && !dump.includes(created.key), 'the key itself is never stored');
    }
    await cli('keys', 'revoke', created.id);
    const revoked = await call(api.base, 'GET', '/lmsp/v1/models', { key: created.key });
    assert.equal(revoked.status, 401);
  });

  test("a revoked key's open streams end at their next heartbeat; other keys' streams go on", async () => {
    const make = async () =>
      JSON.parse(await cli('keys', 'create', '--tenant', 'tenant-cli')) as { id: string; key: string };
    const [revoked, kept] = [await make(), await make()];
    const task = (await call(api.base, 'POST', '/lmsp/v1/tasks', { key: revoked.key, body: TASK_BODY }))
      .body as { events_url: string; response_id: string };
    // Its task's event stream, and the same events through the response, for each key.
    const paths = [task.events_url, `/lmsp/v1/responses/${task.response_id}?stream=true`];
    const open = (key: string) => Promise.all(paths.map((path) => openSse(api.base, path, { key })));
    const [doomed, going] = [await open(revoked.key), await open(kept.key)];
    for (const read of [...doomed, ...going]) await read.waitFor(1);
    await cli('keys', 'revoke', revoked.id);
    // Bounded far past a heartbeat (200 ms), not at a pace a starved host may miss: a stream the
    // revocation left open would go on while its task stays queued.
    const ended = (read: (typeof doomed)[number]) =>
      Promise.race([read.done.then(() => true), new Promise((r) => setTimeout(r, 15_000, false).unref())]);
    for (const read of doomed) assert.equal(await ended(read), true, 'ended at a heartbeat');
    // LMSP's own stream just ends; the response's (OpenAI's surface) ends in OpenAI's error event.
    const [events, response] = doomed;
    assert.ok(!events!.events.some((e) => e.event === 'error'), 'no error event on the LMSP stream');
    assert.equal(events!.retry, null);
    assert.equal(response!.events.at(-1)!.event, 'error');
    assert.equal(response!.events.at(-1)!.data.code, 'unauthorized');
    assert.equal(response!.retry, null, 'nothing to reconnect with');
    for (const read of going) {
      // A heartbeat more than it had: a stream that ended would never send it.
      const comments = read.comments;
      await until('another heartbeat of the kept key’s stream', () =>
        read.comments > comments ? true : undefined,
      );
      read.abort();
    }
  });
  test("the openai SDK raises when a revoked key's stream is cut, instead of returning as if it ended", async () => {
    const made = JSON.parse(await cli('keys', 'create', '--tenant', 'tenant-cli')) as {
      id: string;
      key: string;
    };
    const sdk = new OpenAI({ apiKey: made.key, baseURL: `${api.base}/lmsp/v1`, maxRetries: 0 });
    const body = { model: 'tiny-chat', input: 'Hi' };
    // No worker here: every response stays queued, its stream open on heartbeats.
    const streams = [
      await sdk.responses.create({ ...body, background: true, stream: true }),
      await sdk.responses.retrieve((await sdk.responses.create({ ...body, background: true })).id, {
        stream: true,
      }),
      await sdk.responses.create({ ...body, stream: true }),
    ];
    const iterators = streams.map((s) => s[Symbol.asyncIterator]());
    /** The last event each stream yielded: its `error` event is numbered next. */
    const last: number[] = [];
    for (const it of iterators) {
      const first = await it.next();
      assert.equal(first.done, false, 'the stream is open');
      last.push((first.value as { sequence_number: number }).sequence_number);
    }
    await cli('keys', 'revoke', made.id);
    for (const [i, it] of iterators.entries()) {
      await assert.rejects(
        (async () => {
          for (let e = await it.next(); !e.done; e = await it.next()) last[i] = e.value.sequence_number;
        })(),
        (err: unknown) => {
          assert.ok(err instanceof APIError, `stream ${i}: ${String(err)}`);
          assert.equal(err.code, 'unauthorized');
          assert.match(err.message, /revoked/);
          assert.equal((err.error as { sequence_number?: number }).sequence_number, last[i]! + 1);
          return true;
        },
      );
    }
  });
});

describe('JWT bearer tokens', () => {
  test('verified against a PEM public key or a JWKS URL; the tenant comes from the configured claim', async () => {
    const { publicKey, privateKey } = await generateKeyPair('RS256', { extractable: true });
    const other = await generateKeyPair('RS256');
    const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256' };
    const jwks = createServer((_req, res) =>
      res.setHeader('content-type', 'application/json').end(JSON.stringify({ keys: [jwk] })),
    );
    await new Promise<void>((r) => jwks.listen(0, '127.0.0.1', r));
    const jwksUrl = `http://127.0.0.1:${(jwks.address() as { port: number }).port}/jwks.json`;
    const sign = (claims: Record<string, unknown>, key = privateKey, exp = '5m') =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
        .setIssuer('https://idp.test')
        .setAudience('taskline')
        .setIssuedAt()
        .setExpirationTime(exp)
        .sign(key);
    const settings: Record<string, string>[] = [
      { TASKLINE_JWT_PUBLIC_KEY: (await exportSPKI(publicKey)).replace(/\n/g, '\\n') },
      { TASKLINE_JWT_JWKS_URL: jwksUrl },
    ];
    for (const env of settings) {
      const api = await startApi(stack, {
        ...env,
        TASKLINE_JWT_TENANT_CLAIM: 'org',
        TASKLINE_JWT_ISSUER: 'https://idp.test',
        TASKLINE_JWT_AUDIENCE: 'taskline',
      });
      try {
        const good = await sign({ org: 'tenant-a' });
        const created = await call(api.base, 'POST', '/lmsp/v1/tasks', { key: good, body: TASK_BODY });
        assert.equal(created.status, 202);
        // Same tenant as the static key of tenant-a: the JWT's claim is the tenant.
        const seen = await call(api.base, 'GET', `/lmsp/v1/tasks/${(created.body as { id: string }).id}`);
        assert.equal(seen.status, 200);
        for (const bad of [
          await sign({ org: 'tenant-a' }, other.privateKey),
          await sign({ org: 'tenant-a' }, privateKey, '-1m'),
          await sign({ sub: 'someone' }),
          await sign({ org: 'bad {tenant}' }),
          good.slice(0, -4) + 'AAAA',
        ]) {
          const r = await call(api.base, 'GET', '/lmsp/v1/models', { key: bad });
          assert.equal(r.status, 401, `refused: ${bad.slice(0, 20)}`);
        }
      } finally {
        await api.close();
      }
    }
    jwks.close();
  });

  test('start-up refuses JWT auth without an issuer and an audience, naming both settings', async () => {
    const { publicKey } = await generateKeyPair('RS256', { extractable: true });
    await assert.rejects(
      spawnApi(stack.redisServer.url, {
        TASKLINE_JWT_PUBLIC_KEY: (await exportSPKI(publicKey)).replace(/\n/g, '\\n'),
        TASKLINE_JWT_ISSUER: 'https://idp.test',
      }),
      /api exited with 1:.*TASKLINE_JWT_ISSUER and TASKLINE_JWT_AUDIENCE/,
    );
  });
});

describe('per-tenant limits held in Redis', () => {
  test('request rate is shared by every replica: 429 rate_limited with Retry-After', async () => {
    const env = {
      TASKLINE_RATE_LIMIT_PER_S: '0.1',
      TASKLINE_RATE_LIMIT_BURST: '3',
      TASKLINE_API_KEYS: `tenant-rl:key-rl-0123456789,tenant-a:${KEY_A}`,
    };
    const a = await startApi(stack, env);
    const b = await startApi(stack, env);
    try {
      const opts = { key: 'key-rl-0123456789' };
      assert.equal((await call(a.base, 'GET', '/lmsp/v1/models', opts)).status, 200);
      assert.equal((await call(b.base, 'GET', '/lmsp/v1/models', opts)).status, 200);
      assert.equal((await call(a.base, 'GET', '/lmsp/v1/models', opts)).status, 200);
      const limited = await call(b.base, 'GET', '/lmsp/v1/models', opts);
      assert.equal(limited.status, 429);
      assert.equal((limited.body as { code: string }).code, 'rate_limited');
      assert.ok(
        Number(limited.headers.get('retry-after')) >= 1,
        "Number(limited.headers.get('retry-after')) >= 1",
      );
      // The body is read while the bucket answers, but an over-limit request is refused as such
      // whatever its body: 429, not the 400 its malformed JSON would get.
      const malformed = await call(a.base, 'POST', '/lmsp/v1/tasks', {
        ...opts,
        raw: '{"type": "response", ',
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(malformed.status, 429);
      assert.equal((malformed.body as { code: string }).code, 'rate_limited');
      assert.equal(
        (await call(a.base, 'GET', '/lmsp/v1/models')).status,
        200,
        'other tenants are not affected',
      );
    } finally {
      await a.close();
      await b.close();
    }
  });

  test('unfinished tasks are capped per tenant; finished ones stop counting', async () => {
    const api = await startApi(stack, {
      TASKLINE_MAX_UNFINISHED_TASKS: '2',
      TASKLINE_API_KEYS: 'tenant-cap:key-cap-0123456789',
    });
    try {
      const opts = { key: 'key-cap-0123456789', body: TASK_BODY };
      // A refused create (here an unknown model) holds no place, and at the cap still gets its own error.
      const bad = {
        key: opts.key,
        body: { ...TASK_BODY, input: { ...TASK_BODY.input, model: 'no-such-model' } },
      };
      const refused = async () => {
        const reply = await call(api.base, 'POST', '/lmsp/v1/tasks', bad);
        assert.equal((reply.body as { code: string }).code, 'model_not_found');
      };
      await refused();
      await refused();
      const first = await call(api.base, 'POST', '/lmsp/v1/tasks', opts);
      assert.equal((await call(api.base, 'POST', '/lmsp/v1/tasks', opts)).status, 202);
      const over = await call(api.base, 'POST', '/lmsp/v1/tasks', opts);
      assert.equal(over.status, 429);
      assert.equal((over.body as { code: string }).code, 'rate_limited');
      await refused();
      await call(api.base, 'POST', `/lmsp/v1/tasks/${(first.body as { id: string }).id}/cancel`, {
        key: opts.key,
      });
      assert.equal((await call(api.base, 'POST', '/lmsp/v1/tasks', opts)).status, 202);
      assert.equal((await call(api.base, 'POST', '/lmsp/v1/tasks', opts)).status, 429);
      const id = await nextQueued(stack.redis, 'tenant-cap');
      await runWorker(stack.worker, id, ['done']);
      assert.equal((await call(api.base, 'POST', '/lmsp/v1/tasks', opts)).status, 202);
    } finally {
      await api.close();
    }
  });

  test('at the cap, a retried idempotent create still gets its task, a new one gets 429', async () => {
    const api = await startApi(stack, {
      TASKLINE_MAX_UNFINISHED_TASKS: '1',
      TASKLINE_API_KEYS: 'tenant-cap2:key-cap2-0123456789',
    });
    try {
      const keyed = (k: string, body: unknown = TASK_BODY) => ({
        key: 'key-cap2-0123456789',
        body,
        headers: { 'idempotency-key': k },
      });
      const first = await call(api.base, 'POST', '/lmsp/v1/tasks', keyed('retry-me'));
      assert.equal(first.status, 202);
      const retry = await call(api.base, 'POST', '/lmsp/v1/tasks', keyed('retry-me'));
      assert.equal(retry.status, 202);
      assert.equal((retry.body as { id: string }).id, (first.body as { id: string }).id);
      const other = await call(api.base, 'POST', '/lmsp/v1/tasks', keyed('another'));
      assert.equal(other.status, 429);
      const changed = { ...TASK_BODY, on_restart: 'retry' };
      const reused = await call(api.base, 'POST', '/lmsp/v1/tasks', keyed('retry-me', changed));
      assert.equal((reused.body as { code: string }).code, 'idempotency_key_reused');
    } finally {
      await api.close();
    }
  });

  test('open streams are capped per tenant; a closed stream frees its slot', async () => {
    const api = await startApi(stack, {
      TASKLINE_MAX_STREAMS: '1',
      TASKLINE_API_KEYS: 'tenant-st:key-st-0123456789',
    });
    try {
      const key = 'key-st-0123456789';
      const task = (await call(api.base, 'POST', '/lmsp/v1/tasks', { key, body: TASK_BODY })).body as {
        events_url: string;
      };
      const first = await openSse(api.base, task.events_url, { key });
      await first.waitFor(1);
      const second = await call(api.base, 'GET', task.events_url, { key });
      assert.equal(second.status, 429);
      assert.equal((second.body as { code: string }).code, 'rate_limited');
      first.abort();
      await first.done;
      // The first stream's place is freed once its end is written: wait for that, bounded.
      await until('the freed stream place to admit a new stream', async () => {
        const again = await openSse(api.base, task.events_url, { key });
        if (again.status !== 200) return undefined;
        again.abort();
        return true;
      });
    } finally {
      await api.close();
    }
  });
});
