/**
 * Bad input, property-based (fast-check): every LMSP route and every MCP method gets malformed,
 * oversized, wrongly typed and hostile values. The promise checked: only documented 4xx problems
 * (LMSP) or JSON-RPC errors (MCP), the process stays up, and no stored task changes — the task
 * records, event logs, inputs and snapshots are compared before and after.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { connectRedis, newId } from '@taskline/engine';
import { ApiService, freePort, type RedisServer, startRedis } from '@taskline/testing';
import {
  authz,
  isDocumentedProblem,
  jsonHeaders,
  KEYS,
  mcp,
  mcpBody,
  mcpHeaders,
  rpcMessages,
  send,
  sendRaw,
  API_KEYS,
  type Reply,
} from '../src/client.js';
import { changedTasks, snapshotTasks } from '../src/records.js';

const RUNS = Number(process.env.TASKLINE_FUZZ_RUNS ?? 40);
const LIMITS = {
  TASKLINE_RATE_LIMIT_PER_S: '100000',
  TASKLINE_RATE_LIMIT_BURST: '100000',
  TASKLINE_MAX_ACTIVE_TASKS: '100000',
};

/** Hostile scalars: unicode edge cases, control characters, huge and numeric-looking strings. */
const hostileString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 64 }),
  fc.string({ unit: 'grapheme', maxLength: 32 }),
  fc.constantFrom(
    '',
    '\u0000',
    '\ud800',
    '\udfff\ud800',
    '\u202e\u2066',
    '\ufeff',
    '../../etc/passwd',
    '%2e%2e%2f',
    '__proto__',
    'constructor',
    '${jndi:ldap://x}',
    "'; DROP TABLE tasks; --",
    '<script>alert(1)</script>',
    '\r\nSet-Cookie: a=b',
    '9'.repeat(400),
    '-1',
    '1e309',
    'NaN',
    'task_',
    'task_' + 'A'.repeat(27),
  ),
  fc.nat({ max: 3 }).map((n) => 'x'.repeat(10 ** (n + 2))),
);
const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.anything({ maxDepth: 4, withBigInt: false, withObjectString: true }),
  hostileString,
  fc.constantFrom(null, true, -0, 1e308, -1, 2 ** 53 + 1, Number.MIN_VALUE, [], {}),
);
/** A body near the valid one with one field replaced by a hostile value, or removed, or added. */
const VALID_TASK = {
  type: 'response',
  input: { model: 'tiny-chat', input: 'hello' },
  on_restart: 'fail',
};
function mutate(base: Record<string, unknown>): fc.Arbitrary<unknown> {
  const paths = [
    'type',
    'on_restart',
    'input',
    'input.model',
    'input.input',
    'input.max_output_tokens',
    'input.temperature',
    'input.top_p',
    'input.seed',
    'input.metadata',
    'input.instructions',
    '__proto__',
    'extra',
  ];
  return fc.tuple(fc.constantFrom(...paths), hostileValue, fc.boolean()).map(([path, value, drop]) => {
    const body = structuredClone(base) as Record<string, Record<string, unknown>>;
    const [head, tail] = path.split('.') as [string, string | undefined];
    const target = tail ? (body[head] ?? {}) : (body as Record<string, unknown>);
    const field = tail ?? head;
    if (drop) delete target[field];
    else
      Object.defineProperty(target, field, { value, enumerable: true, writable: true, configurable: true });
    return body;
  });
}
/** Deep JSON: nested arrays or objects to a depth the JSON body limit still lets through. */
const deepJson = fc
  .tuple(fc.integer({ min: 1_000, max: 200_000 }), fc.boolean())
  .map(([depth, arrays]) =>
    arrays ? '['.repeat(depth) + ']'.repeat(depth) : '{"a":'.repeat(depth) + '1' + '}'.repeat(depth),
  );

/** Percent-encodes every byte but unreserved ones (lone surrogates go out as U+FFFD, as UTF-8 does). */
const pathSegment = (s: string): string =>
  [...Buffer.from(s, 'utf8')]
    .map((b) =>
      /[A-Za-z0-9_.~-]/.test(String.fromCharCode(b))
        ? String.fromCharCode(b)
        : `%${b.toString(16).padStart(2, '0')}`,
    )
    .join('') || 'x';

/** Node's default limit on a request head (request line and headers), in bytes. */
const NODE_MAX_HEAD = 16 * 1024;

/**
 * A request without a body. A head over Node's limit is refused by its parser with 431 and the
 * connection closed, which can race with the rest of our write (a reset): both mean "refused
 * before any handler ran", answered here as null. Any other failure still fails the test.
 */
async function sendHead(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
): Promise<Reply | null> {
  const size = path.length + Object.entries(headers).reduce((n, [k, v]) => n + k.length + v.length + 4, 0);
  return send(base, method, path, { headers }).catch((err: unknown) => {
    const code = (err as { code?: string }).code;
    if (size > NODE_MAX_HEAD - 512 && (code === 'ECONNRESET' || code === 'EPIPE')) return null;
    throw err;
  });
}

/** fc.assert with a short report: hostile values can be megabytes long. */
async function holds<T extends unknown[]>(
  property: fc.IAsyncPropertyWithHooks<T>,
  numRuns: number,
): Promise<void> {
  const out = await fc.check(property, { numRuns });
  if (!out.failed) return;
  const example = JSON.stringify(out.counterexample)?.slice(0, 500);
  const error = String((out.errorInstance as Error | undefined)?.message ?? out.errorInstance).slice(0, 1500);
  assert.fail(
    `property failed after ${out.numRuns} runs (seed ${out.seed}, path ${out.counterexamplePath}): ${error}\ncounterexample: ${example}`,
  );
}

describe('fuzzing every route and method with hostile input', () => {
  let server: RedisServer;
  let redis: Redis;
  let api: ApiService;
  /** Tenant A's tasks that tenant B's probes aim at, and that no probe may change. */
  const owned: string[] = [];
  let snapshot: Map<string, string>;
  /** Tasks the fuzzer legitimately created (a valid body slipped through): allowed as new records. */
  const created = new Set<string>();
  let requests = 0;

  before(async () => {
    server = await startRedis();
    redis = connectRedis(server.url, 'fuzz-inspect');
    api = new ApiService(await freePort(), {
      env: { REDIS_URL: server.url, TASKLINE_API_KEYS: API_KEYS, ...LIMITS },
      logFile: `${tmpdir()}/taskline-fuzz-api.log`,
    });
    await api.start();
    for (const onRestart of ['fail', 'retry']) {
      const r = await send(api.base, 'POST', '/lmsp/v1/tasks', {
        headers: jsonHeaders(KEYS.a),
        body: JSON.stringify({ ...VALID_TASK, on_restart: onRestart }),
      });
      assert.equal(r.status, 202);
      owned.push((r.body as { id: string }).id);
    }
    snapshot = await snapshotTasks(redis);
  });
  after(async () => {
    await api.stop();
    redis.disconnect();
    await server.stop();
    process.stdout.write(`# fuzz: ${requests} requests, ${created.size} tasks created by valid bodies\n`);
  });

  /** Checks one LMSP answer: a documented problem (or a success on a valid body), never 5xx. */
  const lmspOk = (r: Reply, what: string) => {
    requests++;
    assert.ok(r.status < 500, `${what}: ${r.status} ${r.text.slice(0, 300)}`);
    if (r.status >= 400)
      assert.ok(isDocumentedProblem(r), `${what}: undocumented ${r.status} ${r.text.slice(0, 300)}`);
    const rid = r.headers['x-request-id'];
    assert.ok(rid === undefined || /^[A-Za-z0-9._:-]{1,128}$/.test(rid), `${what}: echoed request id ${rid}`);
  };
  /** Checks one MCP answer: HTTP < 500 and every JSON message a well-formed JSON-RPC result or error. */
  const mcpOk = (r: Reply, what: string) => {
    requests++;
    assert.ok(r.status < 500, `${what}: ${r.status} ${r.text.slice(0, 300)}`);
    for (const m of rpcMessages(r)) {
      assert.equal(m.jsonrpc, '2.0', `${what}: ${r.text.slice(0, 300)}`);
      if (m.error) assert.ok(Number.isInteger(m.error.code), `${what}: error code ${String(m.error.code)}`);
    }
    // 431: Node's parser refuses headers over its limit before any handler runs.
    if (r.status >= 400 && r.status !== 431)
      assert.ok(rpcMessages(r)[0]?.error, `${what}: ${r.status} without a JSON-RPC error`);
  };
  /** After every property: still up, no stored task changed except those a 202 created. */
  const unchanged = async () => {
    assert.equal(api.child?.exitCode, null, 'the api process is still running');
    assert.equal((await send(api.base, 'GET', '/healthz')).status, 200);
    const now = await snapshotTasks(redis);
    const changed = changedTasks(snapshot, now).filter((id) => !created.has(id));
    assert.deepEqual(changed, [], 'stored tasks changed');
  };
  const noteCreated = (r: Reply) => {
    if (r.status === 202) created.add((r.body as { id: string }).id);
  };

  it('POST /lmsp/v1/tasks and /responses: hostile bodies, deep JSON, wrong types', async () => {
    await holds(
      fc.asyncProperty(
        fc.oneof(mutate(VALID_TASK), hostileValue, fc.constant(undefined)),
        fc.constantFrom('/lmsp/v1/tasks', '/lmsp/v1/responses'),
        async (body, path) => {
          // A synchronous response would wait for a worker; an unserved model keeps it a 4xx.
          const sent =
            path === '/lmsp/v1/responses' && body && typeof body === 'object' && !Array.isArray(body)
              ? {
                  ...(body as Record<string, unknown>),
                  ...(body as { input?: object }).input,
                  model: 'no-such-model',
                }
              : body;
          const r = await send(api.base, 'POST', path, {
            headers: jsonHeaders(KEYS.a),
            body: sent === undefined ? undefined : JSON.stringify(sent),
          });
          lmspOk(r, `POST ${path} ${JSON.stringify(sent)?.slice(0, 200)}`);
          noteCreated(r);
        },
      ),
      RUNS,
    );
    await holds(
      fc.asyncProperty(deepJson, async (raw) => {
        const r = await send(api.base, 'POST', '/lmsp/v1/tasks', { headers: jsonHeaders(KEYS.a), body: raw });
        lmspOk(r, `deep JSON ${raw.length} bytes`);
      }),
      Math.ceil(RUNS / 4),
    );
    for (const [what, body, type] of [
      [
        'huge string',
        JSON.stringify({ ...VALID_TASK, input: { model: 'tiny-chat', input: 'x'.repeat(3_000_000) } }),
        'application/json',
      ],
      ['not JSON', '{"type": "response",', 'application/json'],
      ['form body', 'type=response', 'application/x-www-form-urlencoded'],
      ['latin1 charset', JSON.stringify(VALID_TASK), 'application/json; charset=latin1'],
      ['bare scalar', '42', 'application/json'],
      ['duplicate keys', '{"type":"response","type":"other"}', 'application/json'],
    ] as const) {
      const r = await send(api.base, 'POST', '/lmsp/v1/tasks', {
        headers: { ...authz(KEYS.a), 'content-type': type },
        body,
      });
      lmspOk(r, what);
    }
    await unchanged();
  });

  it('task routes: hostile, unknown and other tenants\u2019 ids, hostile Last-Event-ID and methods', async () => {
    const idArb = fc.oneof(
      hostileString.map((s) => ({ id: pathSegment(s), key: KEYS.a })),
      fc
        .constantFrom('%ff%fe', '%E0%A4%A', '%00', '%', '..', '.', '%2F..%2F')
        .map((id) => ({ id, key: KEYS.a })),
      fc.constant(null).map(() => ({ id: newId('task'), key: KEYS.a })),
      fc.constantFrom(...owned).map((id) => ({ id, key: KEYS.b })),
    );
    await holds(
      fc.asyncProperty(
        idArb,
        fc.constantFrom('', '/cancel', '/events'),
        fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS'),
        fc.option(hostileString.filter((s) => /^[\t\x20-\x7e]*$/.test(s) && s.length < 8000)),
        async ({ id, key }, suffix, method, lastEventId) => {
          const path = `/lmsp/v1/tasks/${id}${suffix}`;
          const headers: Record<string, string> = { ...authz(key) };
          if (lastEventId !== null) headers['last-event-id'] = lastEventId;
          const r = await sendHead(api.base, method, path, headers);
          // Node's parser refused a head over its size limit and closed before our write ended.
          if (r === null) {
            requests++;
            return;
          }
          // HEAD has no body; 431 is Node's own parser refusing a path over its header limit.
          if (method === 'HEAD' || r.status === 431 || (method === 'OPTIONS' && r.status === 204)) {
            requests++;
            assert.ok(r.status < 500);
            return;
          }
          lmspOk(r, `${method} ${path.slice(0, 120)}`);
          // Whatever the id, a probe never reaches a task that is not the caller's.
          assert.ok(r.status >= 400 || r.status === 204, `${method} ${path} answered ${r.status}`);
        },
      ),
      RUNS * 2,
    );
    const long = await sendHead(api.base, 'GET', `/lmsp/v1/tasks/${'a'.repeat(60_000)}`, authz(KEYS.a));
    requests++;
    assert.ok(
      long === null || long.status === 431 || long.status === 414 || isDocumentedProblem(long),
      `long id: ${long?.status}`,
    );
    await unchanged();
  });

  it('headers: hostile Authorization, Idempotency-Key, Content-Type and injected header lines', async () => {
    await holds(
      fc.asyncProperty(
        fc.record({
          authorization: fc.oneof(
            fc.constant(`Bearer ${KEYS.a}`),
            hostileString
              .filter((s) => /^[\t\x20-\x7e]*$/.test(s) && s.length < 8000)
              .map((s) => `Bearer ${s}`),
            fc.constantFrom(
              '',
              'Basic YTpi',
              'Bearer',
              `bearer  ${KEYS.a}  `,
              `Bearer ${KEYS.a}, Bearer ${KEYS.b}`,
            ),
          ),
          'idempotency-key': hostileString.filter((s) => /^[\t\x20-\x7e]*$/.test(s) && s.length < 8000),
          'content-type': fc.constantFrom(
            'application/json',
            'text/plain',
            'application/json; charset=utf-16',
            'application/problem+json',
            '',
          ),
        }),
        async (headers) => {
          // Unserved model: a 4xx however the headers parse, so the property can hold for every case.
          const r = await send(api.base, 'POST', '/lmsp/v1/tasks', {
            headers,
            body: JSON.stringify({ ...VALID_TASK, input: { model: 'no-such-model', input: 'x' } }),
          });
          lmspOk(r, `headers ${JSON.stringify(headers).slice(0, 200)}`);
          assert.ok(r.status >= 400);
        },
      ),
      RUNS,
    );
    // Bytes no client library sends: CR/LF and NUL inside header values, header folding, smuggling.
    const port = api.port;
    for (const raw of [
      `GET /lmsp/v1/tasks/${owned[0]} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEYS.b}\r\nX-Request-Id: a\rInjected: 1\r\n\r\n`,
      `GET /lmsp/v1/tasks/${owned[0]} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEYS.b}\r\n Bearer ${KEYS.a}\r\n\r\n`,
      `POST /lmsp/v1/tasks/${owned[0]}/cancel HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEYS.b}\u0000${KEYS.a}\r\n\r\n`,
      `POST /lmsp/v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nPOST /lmsp/v1/tasks/${owned[0]}/cancel HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEYS.a}\r\n\r\n`,
      `GET /lmsp/v1/tasks/${owned[0]}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEYS.a}\r\nLast-Event-ID: 1\r\nLast-Event-ID: 2\r\n\r\n`,
    ]) {
      const out = await sendRaw(port, raw, 2000);
      requests++;
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(out)?.[1] ?? 0);
      assert.ok(
        status === 0 || (status >= 200 && status < 500),
        `raw request answered ${status}: ${out.slice(0, 200)}`,
      );
      assert.doesNotMatch(out, /\r\nInjected:/i, 'an injected header line came back');
    }
    await unchanged();
  });

  it('MCP: every method with hostile params, envelopes and bodies', async () => {
    const methods = [
      'server/discover',
      'tools/list',
      'tools/call',
      'tasks/get',
      'tasks/update',
      'tasks/cancel',
      'tasks/list',
      'subscriptions/listen',
      'ping',
      'initialize',
      'resources/list',
      'prompts/list',
      'completion/complete',
      'logging/setLevel',
      'notifications/cancelled',
    ];
    const taskIdArb = fc.oneof(
      hostileString,
      fc.constant(null).map(() => newId('task')),
      fc.constantFrom(...owned),
    );
    const paramsArb = fc.oneof(
      fc.dictionary(hostileString, hostileValue, { maxKeys: 4 }),
      taskIdArb.map((taskId) => ({ taskId })),
      fc.record({ taskId: taskIdArb, inputResponses: hostileValue }),
      fc.record({
        name: fc.constantFrom('generate', 'slow_compute', 'nope', '__proto__'),
        arguments: hostileValue,
      }),
      fc.array(taskIdArb, { maxLength: 5 }).map((taskIds) => ({ notifications: { taskIds } })),
    );
    await holds(
      fc.asyncProperty(
        fc.oneof(fc.constantFrom(...methods), hostileString),
        paramsArb,
        fc.oneof(fc.integer(), hostileString, fc.constant(null)),
        fc.boolean(),
        async (method, params, id, tasks) => {
          // Tenant B only: every task it can name belongs to A or to no one, so nothing may change.
          const headers = mcpHeaders(
            KEYS.b,
            /^[\x20-\x7e]*$/.test(method) ? method.slice(0, 200) : 'tools/call',
          );
          const r = await send(api.base, 'POST', '/mcp', {
            headers,
            body: JSON.stringify(mcpBody(id, method, params as Record<string, unknown>, tasks)),
            timeoutMs: 10_000,
          });
          mcpOk(r, `${method.slice(0, 60)} ${JSON.stringify(params).slice(0, 200)}`);
        },
      ),
      RUNS * 2,
    );
    for (const [what, body] of [
      ['not JSON', '{"jsonrpc":'],
      ['batch', JSON.stringify([mcpBody(1, 'ping'), mcpBody(2, 'tools/list')])],
      ['empty batch', '[]'],
      ['no method', JSON.stringify({ jsonrpc: '2.0', id: 1 })],
      ['wrong version', JSON.stringify({ ...mcpBody(1, 'ping'), jsonrpc: '1.0' })],
      [
        'huge',
        JSON.stringify(
          mcpBody(1, 'tools/call', { name: 'generate', arguments: { prompt: 'x'.repeat(2_000_000) } }),
        ),
      ],
      [
        'deep',
        JSON.stringify(mcpBody(1, 'tasks/get', { taskId: owned[0] })).replace(
          '"taskId"',
          '"deep":' + '['.repeat(100_000) + ']'.repeat(100_000) + ',"taskId"',
        ),
      ],
    ] as const) {
      const r = await send(api.base, 'POST', '/mcp', { headers: mcpHeaders(KEYS.b, 'ping'), body });
      mcpOk(r, what);
    }
    for (const method of ['GET', 'PUT', 'DELETE']) {
      const r = await send(api.base, method, '/mcp', { headers: mcpHeaders(KEYS.b, 'ping') });
      mcpOk(r, `${method} /mcp`);
    }
    const { message } = await mcp(api.base, KEYS.b, 'tasks/get', { taskId: owned[0] });
    assert.equal(message?.error?.code, -32602, 'a foreign task id is unknown');
    await unchanged();
  });
});
