/**
 * Bad input on every LMSP route, property-based (fast-check): malformed, oversized, wrongly typed and
 * hostile bodies, ids, methods and headers. Only documented 4xx problems, the process stays up, and
 * no stored task changes — the task records, event logs, inputs and snapshots are compared before
 * and after.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { newId } from '@taskline/engine';
import { authz, isDocumentedProblem, jsonHeaders, KEYS, send, sendRaw, type Reply } from '../src/client.js';
import { holds, hostileString, hostileValue, RUNS, useFuzzStack, VALID_TASK } from './fuzz-harness.js';

/** A body near the valid one with one field replaced by a hostile value, or removed, or added. */
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

describe('fuzzing every LMSP route and method with hostile input', () => {
  const fuzz = useFuzzStack();

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
          const r = await send(fuzz.api.base, 'POST', path, {
            headers: jsonHeaders(KEYS.a),
            body: sent === undefined ? undefined : JSON.stringify(sent),
          });
          fuzz.lmspOk(r, `POST ${path} ${JSON.stringify(sent)?.slice(0, 200)}`);
          fuzz.noteCreated(r);
        },
      ),
      RUNS,
    );
    await holds(
      fc.asyncProperty(deepJson, async (raw) => {
        const r = await send(fuzz.api.base, 'POST', '/lmsp/v1/tasks', {
          headers: jsonHeaders(KEYS.a),
          body: raw,
        });
        fuzz.lmspOk(r, `deep JSON ${raw.length} bytes`);
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
      const r = await send(fuzz.api.base, 'POST', '/lmsp/v1/tasks', {
        headers: { ...authz(KEYS.a), 'content-type': type },
        body,
      });
      fuzz.lmspOk(r, what);
    }
    await fuzz.unchanged();
  });

  it('task routes: hostile, unknown and other tenants\u2019 ids, hostile Last-Event-ID and methods', async () => {
    const idArb = fc.oneof(
      hostileString.map((s) => ({ id: pathSegment(s), key: KEYS.a })),
      fc
        .constantFrom('%ff%fe', '%E0%A4%A', '%00', '%', '..', '.', '%2F..%2F')
        .map((id) => ({ id, key: KEYS.a })),
      fc.constant(null).map(() => ({ id: newId('task'), key: KEYS.a })),
      fc.constantFrom(...fuzz.owned).map((id) => ({ id, key: KEYS.b })),
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
          const r = await sendHead(fuzz.api.base, method, path, headers);
          // Node's parser refused a head over its size limit and closed before our write ended.
          if (r === null) {
            fuzz.requests++;
            return;
          }
          // HEAD has no body; 431 is Node's own parser refusing a path over its header limit.
          if (method === 'HEAD' || r.status === 431 || (method === 'OPTIONS' && r.status === 204)) {
            fuzz.requests++;
            assert.ok(r.status < 500, 'r.status < 500');
            return;
          }
          fuzz.lmspOk(r, `${method} ${path.slice(0, 120)}`);
          // Whatever the id, a probe never reaches a task that is not the caller's.
          assert.ok(r.status >= 400 || r.status === 204, `${method} ${path} answered ${r.status}`);
        },
      ),
      RUNS * 2,
    );
    const long = await sendHead(fuzz.api.base, 'GET', `/lmsp/v1/tasks/${'a'.repeat(60_000)}`, authz(KEYS.a));
    fuzz.requests++;
    assert.ok(
      long === null || long.status === 431 || long.status === 414 || isDocumentedProblem(long),
      `long id: ${long?.status}`,
    );
    await fuzz.unchanged();
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
          const r = await send(fuzz.api.base, 'POST', '/lmsp/v1/tasks', {
            headers,
            body: JSON.stringify({ ...VALID_TASK, input: { model: 'no-such-model', input: 'x' } }),
          });
          fuzz.lmspOk(r, `headers ${JSON.stringify(headers).slice(0, 200)}`);
          assert.ok(r.status >= 400, 'r.status >= 400');
        },
      ),
      RUNS,
    );
    // Bytes no client library sends: CR/LF and NUL inside header values, header folding, smuggling.
    const port = fuzz.api.port;
    for (const raw of [
      `GET /lmsp/v1/tasks/${fuzz.owned[0]} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEYS.b}\r\nX-Request-Id: a\rInjected: 1\r\n\r\n`,
      `GET /lmsp/v1/tasks/${fuzz.owned[0]} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEYS.b}\r\n Bearer ${KEYS.a}\r\n\r\n`,
      `POST /lmsp/v1/tasks/${fuzz.owned[0]}/cancel HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEYS.b}\u0000${KEYS.a}\r\n\r\n`,
      `POST /lmsp/v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nPOST /lmsp/v1/tasks/${fuzz.owned[0]}/cancel HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEYS.a}\r\n\r\n`,
      `GET /lmsp/v1/tasks/${fuzz.owned[0]}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEYS.a}\r\nLast-Event-ID: 1\r\nLast-Event-ID: 2\r\n\r\n`,
    ]) {
      const out = await sendRaw(port, raw, 2000);
      fuzz.requests++;
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(out)?.[1] ?? 0);
      assert.ok(
        status === 0 || (status >= 200 && status < 500),
        `raw request answered ${status}: ${out.slice(0, 200)}`,
      );
      assert.doesNotMatch(out, /\r\nInjected:/i, 'an injected header line came back');
    }
    await fuzz.unchanged();
  });
});
