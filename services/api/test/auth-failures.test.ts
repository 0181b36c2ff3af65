/**
 * Failed authentications per client address, counted in Redis and shared by every replica: over
 * the limit every surface answers 429 with Retry-After, before any key or JWT is checked, and a
 * good key from that address is refused too until the window passes (or a guess that hit would
 * be told by its 200). Real HTTP against in-process replicas on one Redis (or a Redis Cluster).
 */
import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Cluster } from 'ioredis';
import { connectRedis, isCluster } from '@taskline/engine';
import { monitorRedis, scanKeys, until } from '@taskline/testing';
import {
  call,
  KEY_A,
  KEY_B,
  startApi,
  startRedisAndStore,
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

const ADMIN_KEY = 'admin-key-0123456789abcdef';
/**
 * A window no starved host outlasts while a test makes an address go over and checks every surface
 * refuses it: with 2 s, a slow run's window passed between the failures and the refusals checked.
 * Each test starts clean instead of waiting a window out (`beforeEach`); the one that needs the
 * window to pass has replicas of its own with a short one.
 */
const WINDOW_S = 30;
const LIMITED = {
  TASKLINE_AUTH_FAILURE_LIMIT: '3',
  TASKLINE_AUTH_FAILURE_WINDOW_S: String(WINDOW_S),
  TASKLINE_ADMIN_KEYS: ADMIN_KEY,
};

/** No address has failed yet: the shared counts are gone (a replica's own memory goes with the replica). */
beforeEach(async () => {
  for (const key of await scanKeys(stack.redis, 'tl:api:auth-failures:*')) await stack.redis.del(key);
});
const MCP_HEADERS = { accept: 'application/json, text/event-stream' };
const MCP_LIST = { jsonrpc: '2.0', id: 7, method: 'tools/list', params: {} };

/** A problem's code, and its Retry-After as a number. */
const refusal = (r: { status: number; headers: Headers; body: unknown }) => ({
  status: r.status,
  code: (r.body as { code?: string }).code,
  retryAfter: Number(r.headers.get('retry-after')),
});

/**
 * Every command Redis runs (on each primary of a Redis Cluster) while `run` runs. MONITOR may
 * tell a command after its reply reached the client: a marker sent to each node after `run` is
 * told after every command before it.
 */
async function commandsDuring(run: () => Promise<void>): Promise<string[][]> {
  const urls = isCluster(stack.redis)
    ? (stack.redis as unknown as Cluster).nodes('master').map((n) => `redis://127.0.0.1:${n.options.port}`)
    : [stack.redisServer.url];
  const marker = `marker-${Date.now()}`;
  // Connected before MONITOR starts, so that their own handshake is not told.
  const nodes = urls.map((url) => connectRedis(url, 'marker'));
  await Promise.all(nodes.map((node) => node.ping()));
  const seen: string[][] = [];
  let markers = 0;
  const monitors = urls.map((url) =>
    monitorRedis(url, (args) => {
      if (args[1] === marker) markers++;
      else seen.push(args);
    }),
  );
  await Promise.all(monitors.map((m) => m.ready));
  try {
    await run();
    await Promise.all(nodes.map((node) => node.echo(marker)));
    await until(
      'MONITOR to tell every command before the markers',
      () => markers === urls.length || undefined,
    );
  } finally {
    monitors.forEach((m) => m.stop());
    nodes.forEach((node) => node.disconnect());
  }
  return seen;
}

describe('failed authentications per client address', () => {
  // Fresh replicas for each test: none remembers an address another test took over the limit.
  let a: InProcessApi;
  let b: InProcessApi;
  beforeEach(async () => {
    a = await startApi(stack, LIMITED);
    b = await startApi(stack, LIMITED);
  });
  afterEach(async () => {
    await a.close();
    await b.close();
  });

  test('shared by replicas: over the limit every surface answers 429 too_many_auth_failures, a good key included', async () => {
    // Three bad keys from 127.0.0.1, spread over both replicas: each still a plain 401.
    for (const api of [a, b, a]) {
      const r = await call(api.base, 'GET', '/lmsp/v1/models', { key: 'not-a-key-0000' });
      assert.equal(r.status, 401);
    }
    // The fourth attempt, on either replica, whatever its credential: refused before it is checked.
    for (const [api, key] of [
      [b, KEY_A],
      [a, KEY_A],
      [b, 'not-a-key-0001'],
    ] as const) {
      const r = refusal(await call(api.base, 'GET', '/lmsp/v1/models', { key }));
      assert.equal(r.status, 429);
      assert.equal(r.code, 'too_many_auth_failures');
      assert.ok(r.retryAfter >= 1 && r.retryAfter <= WINDOW_S, `Retry-After ${r.retryAfter}`);
    }
    // OpenAI's error shape on its routes.
    const responses = await call(a.base, 'POST', '/lmsp/v1/responses', {
      body: { model: 'tiny-chat', input: 'hi' },
    });
    assert.equal(responses.status, 429);
    assert.deepEqual((responses.body as { error: unknown }).error, {
      message: (responses.body as { detail: string }).detail,
      type: 'rate_limit_error',
      code: 'too_many_auth_failures',
      param: null,
    });
    // The operator console's API, with a good operator key.
    const admin = await call(b.base, 'GET', '/admin/v1/overview', { key: ADMIN_KEY, skipCheck: true });
    assert.equal(refusal(admin).status, 429);
    assert.equal(refusal(admin).code, 'too_many_auth_failures');
    // MCP: the HTTP status, and a JSON-RPC error as the tenant limits' 429s.
    const mcp = await call(a.base, 'POST', '/mcp', { body: MCP_LIST, headers: MCP_HEADERS, skipCheck: true });
    assert.equal(mcp.status, 429);
    assert.ok(Number(mcp.headers.get('retry-after')) >= 1, "Number(mcp.headers.get('retry-after')) >= 1");
    const { error, id } = mcp.body as { id: unknown; error: { code: number; data: Record<string, unknown> } };
    assert.equal(id, 7);
    assert.equal(error.code, -32005);
    assert.equal(error.data.code, 'too_many_auth_failures');
    assert.ok(Number(error.data.retryAfter) >= 1, 'Number(error.data.retryAfter) >= 1');
  });

  test('once the window has passed, the good key works again on both replicas', async () => {
    // Replicas of this test's own with a 2 s window, waited out. Both must have known the address
    // over before it passes, which a starved host may not get to within 2 s: then that round's
    // window is let pass and the address taken over again.
    const short = { ...LIMITED, TASKLINE_AUTH_FAILURE_WINDOW_S: '2' };
    const c = await startApi(stack, short);
    const d = await startApi(stack, short);
    try {
      for (let round = 1; ; round++) {
        for (const api of [c, d, c])
          await call(api.base, 'GET', '/lmsp/v1/models', { key: 'not-a-key-0000' });
        const refused = [
          (await call(d.base, 'GET', '/lmsp/v1/models', { key: KEY_A })).status,
          (await call(c.base, 'GET', '/lmsp/v1/models', { key: KEY_A })).status,
        ];
        if (refused.every((status) => status === 429)) break;
        assert.ok(
          round < 5,
          `never over the limit on both replicas within the window: ${refused.join(', ')}`,
        );
        await sleep(2100);
      }
      await sleep(2100);
      assert.equal((await call(c.base, 'GET', '/lmsp/v1/models')).status, 200);
      assert.equal((await call(d.base, 'GET', '/lmsp/v1/models')).status, 200);
    } finally {
      await c.close();
      await d.close();
    }
  });

  test('a credential this replica verified before the address went over keeps working there; others wait', async () => {
    // Behind a balancer that hides client addresses every client shares one count: a stranger's
    // bad keys must not lock out a client whose key the replica has already seen to be good.
    assert.equal((await call(a.base, 'GET', '/lmsp/v1/models', { key: KEY_B })).status, 200);
    for (let i = 0; i < 3; i++)
      assert.equal((await call(a.base, 'GET', '/lmsp/v1/models', { key: `stranger-${i}-0000` })).status, 401);
    assert.equal((await call(a.base, 'GET', '/lmsp/v1/models', { key: KEY_B })).status, 200);
    // Never a credential this replica has not verified: no guess is checked.
    assert.equal(refusal(await call(a.base, 'GET', '/lmsp/v1/models', { key: 'guess-0000' })).status, 429);
    // Nor on a replica that never verified it (once it knows the address is over).
    assert.equal(
      refusal(await call(b.base, 'GET', '/lmsp/v1/models', { key: 'stranger-3-0000' })).status,
      429,
    );
    assert.equal(refusal(await call(b.base, 'GET', '/lmsp/v1/models', { key: KEY_B })).status, 429);
  });

  test("a replica that saw none of the address's failures counts its next one against the shared count", async () => {
    const c = await startApi(stack, LIMITED);
    try {
      for (let i = 0; i < 3; i++)
        assert.equal(
          (await call(a.base, 'GET', '/lmsp/v1/models', { key: `bad-key-${i}-0000` })).status,
          401,
        );
      const r = refusal(await call(c.base, 'GET', '/lmsp/v1/models', { key: 'bad-key-3-0000' }));
      assert.equal(r.status, 429);
      assert.equal(r.code, 'too_many_auth_failures');
    } finally {
      await c.close();
    }
  });

  test("a good key's requests cost no Redis command beyond its own; a failure costs one", async () => {
    // A replica started for this test opens its connection to a cluster node on first use: its
    // handshake (CLIENT SETNAME) is no request's cost, so the first request goes before counting.
    assert.equal((await call(a.base, 'GET', '/lmsp/v1/models')).status, 200);
    const seen = await commandsDuring(async () => {
      for (let i = 0; i < 5; i++) assert.equal((await call(a.base, 'GET', '/lmsp/v1/models')).status, 200);
    });
    // Nor is a connection's upkeep (a reconnect's handshake, a cluster client's slot-table read).
    const good = seen.filter((args) => !/^(client|cluster|readonly|info)$/i.test(args[0]!));
    // Each request takes one token from its tenant's bucket (a script: MONITOR shows its own
    // commands too, all on the bucket's key), and that is all.
    const scripts = (commands: string[][]) => commands.filter((args) => /^eval/i.test(args[0]!));
    assert.equal(scripts(good).length, 5, JSON.stringify(seen));
    for (const args of good) assert.ok(args.includes('tl:api:rate:{tenant-a}'), JSON.stringify(args));
    // A failure: the key store's lookup, then one script on the address's count.
    const bad = await commandsDuring(async () => {
      assert.equal((await call(a.base, 'GET', '/lmsp/v1/models', { key: 'bad-key-x-0000' })).status, 401);
    });
    const counted = scripts(bad).filter((args) =>
      args.some((arg) => arg.startsWith('tl:api:auth-failures:')),
    );
    assert.equal(counted.length, 1, JSON.stringify(bad));
  });
});

describe('the client address behind a load balancer (TASKLINE_TRUST_PROXY)', () => {
  const bad = (api: InProcessApi, forwardedFor: string) =>
    call(api.base, 'GET', '/lmsp/v1/models', {
      key: 'not-a-key-0000',
      headers: { 'x-forwarded-for': forwardedFor },
    });

  test('trusted: each client behind the proxy has its own count', async () => {
    const api = await startApi(stack, { ...LIMITED, TASKLINE_TRUST_PROXY: 'loopback' });
    try {
      for (let i = 0; i < 3; i++) assert.equal((await bad(api, '203.0.113.7')).status, 401);
      assert.equal((await bad(api, '203.0.113.7')).status, 429);
      assert.equal((await bad(api, '198.51.100.9')).status, 401, 'another client is not blocked');
      const good = await call(api.base, 'GET', '/lmsp/v1/models', {
        headers: { 'x-forwarded-for': '198.51.100.9' },
      });
      assert.equal(good.status, 200);
    } finally {
      await api.close();
    }
  });

  test('an IPv6 client is counted by its /64, as one host may hold all of it', async () => {
    const api = await startApi(stack, { ...LIMITED, TASKLINE_TRUST_PROXY: 'loopback' });
    try {
      for (const address of ['2001:db8:7:8::1', '2001:DB8:7:8:ab::1', '2001:db8:7:8:ffff:ffff:ffff:ffff'])
        assert.equal((await bad(api, address)).status, 401);
      assert.equal((await bad(api, '2001:db8:7:8::42')).status, 429);
      assert.equal((await bad(api, '2001:db8:7:9::1')).status, 401, 'the next /64 is another client');
    } finally {
      await api.close();
    }
  });

  test('by default X-Forwarded-For is not trusted: a forged one changes no count', async () => {
    const api = await startApi(stack, LIMITED);
    try {
      for (let i = 0; i < 3; i++) assert.equal((await bad(api, `192.0.2.${i}`)).status, 401);
      assert.equal((await bad(api, '192.0.2.99')).status, 429);
    } finally {
      await api.close();
    }
  });
});
