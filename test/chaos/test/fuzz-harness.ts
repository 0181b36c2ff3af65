/**
 * What the fuzz tests share: hostile values, the property runner and a stack (Redis and a real api
 * process, with tenant A's tasks to aim at) whose stored tasks every property checks unchanged.
 */
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { connectRedis } from '@taskline/engine';
import { ApiService, freePort, type RedisServer, startRedis } from '@taskline/testing';
import {
  isDocumentedProblem,
  jsonHeaders,
  KEYS,
  rpcMessages,
  send,
  API_KEYS,
  type Reply,
} from '../src/client.js';
import { changedTasks, snapshotTasks } from '../src/records.js';

export const RUNS = Number(process.env.TASKLINE_FUZZ_RUNS ?? 40);
const LIMITS = {
  TASKLINE_RATE_LIMIT_PER_S: '100000',
  TASKLINE_RATE_LIMIT_BURST: '100000',
  TASKLINE_MAX_UNFINISHED_TASKS: '100000',
};

/** Hostile scalars: unicode edge cases, control characters, huge and numeric-looking strings. */
export const hostileString = fc.oneof(
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
export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.anything({ maxDepth: 4, withBigInt: false, withObjectString: true }),
  hostileString,
  fc.constantFrom(null, true, -0, 1e308, -1, 2 ** 53 + 1, Number.MIN_VALUE, [], {}),
);
/** A body near the valid one with one field replaced by a hostile value, or removed, or added. */
/** The valid task body: the stack's own tasks, and what mutate starts from. */
export const VALID_TASK = {
  type: 'response',
  input: { model: 'tiny-chat', input: 'hello' },
  on_restart: 'fail',
};

/** fc.assert with a short report: hostile values can be megabytes long. */
export async function holds<T extends unknown[]>(
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

/** The api under fuzz and the checks every answer and every property go through. */
export interface FuzzStack {
  readonly api: ApiService;
  /** Tenant A's tasks that tenant B's probes aim at, and that no probe may change. */
  readonly owned: string[];
  /** Requests sent, for the report line; tests count the answers they check themselves. */
  requests: number;
  lmspOk(r: Reply, what: string): void;
  mcpOk(r: Reply, what: string): void;
  unchanged(): Promise<void>;
  noteCreated(r: Reply): void;
}

/** Starts Redis and an api process before the file's tests and stops them after. */
export function useFuzzStack(): FuzzStack {
  let server: RedisServer;
  let redis: Redis;
  let api: ApiService;
  let snapshot: Map<string, string>;
  /** Tasks the fuzzer legitimately created (a valid body slipped through): allowed as new records. */
  const created = new Set<string>();
  const stack: FuzzStack = {
    get api() {
      return api;
    },
    owned: [],
    requests: 0,
    /** Checks one LMSP answer: a documented problem (or a success on a valid body), never 5xx. */
    lmspOk(r, what) {
      stack.requests++;
      assert.ok(r.status < 500, `${what}: ${r.status} ${r.text.slice(0, 300)}`);
      if (r.status >= 400)
        assert.ok(isDocumentedProblem(r), `${what}: undocumented ${r.status} ${r.text.slice(0, 300)}`);
      const rid = r.headers['x-request-id'];
      assert.ok(
        rid === undefined || /^[A-Za-z0-9._:-]{1,128}$/.test(rid),
        `${what}: echoed request id ${rid}`,
      );
    },
    /** Checks one MCP answer: HTTP < 500 and every JSON message a well-formed JSON-RPC result or error. */
    mcpOk(r, what) {
      stack.requests++;
      assert.ok(r.status < 500, `${what}: ${r.status} ${r.text.slice(0, 300)}`);
      for (const m of rpcMessages(r)) {
        assert.equal(m.jsonrpc, '2.0', `${what}: ${r.text.slice(0, 300)}`);
        if (m.error) assert.ok(Number.isInteger(m.error.code), `${what}: error code ${String(m.error.code)}`);
      }
      // 431: Node's parser refuses headers over its limit before any handler runs.
      if (r.status >= 400 && r.status !== 431)
        assert.ok(rpcMessages(r)[0]?.error, `${what}: ${r.status} without a JSON-RPC error`);
    },
    /** After every property: still up, no stored task changed except those a 202 created. */
    async unchanged() {
      assert.equal(api.child?.exitCode, null, 'the api process is still running');
      assert.equal((await send(api.base, 'GET', '/healthz')).status, 200);
      const now = await snapshotTasks(redis);
      const changed = changedTasks(snapshot, now).filter((id) => !created.has(id));
      assert.deepEqual(changed, [], 'stored tasks changed');
    },
    noteCreated(r) {
      if (r.status === 202) created.add((r.body as { id: string }).id);
    },
  };

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
      stack.owned.push((r.body as { id: string }).id);
    }
    snapshot = await snapshotTasks(redis);
  });
  after(async () => {
    await api.stop();
    redis.disconnect();
    await server.stop();
    process.stdout.write(
      `# fuzz: ${stack.requests} requests, ${created.size} tasks created by valid bodies\n`,
    );
  });
  return stack;
}
