/**
 * Which requests reach a route: only the documented paths, as written (routing is case-sensitive
 * on every surface: another case is the api's 404 problem), and OPTIONS, which reveals nothing of
 * a tenant's, answered 204 with `Allow` without credentials on LMSP, the OpenAI routes and
 * `/admin/v1`. The api sends no CORS headers. Real HTTP against an in-process api.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { scanKeys } from '@taskline/testing';
import {
  call,
  KEY_A,
  startApi,
  startRedisAndStore,
  TASK_BODY,
  type InProcessApi,
  type RedisAndStore,
} from './helpers.js';

const ADMIN_KEY = 'admin-key-0123456789abcdef';
const TASK = 'task_00000000000000000000000000';
const RESPONSE = 'resp_00000000000000000000000000';

let stack: RedisAndStore;
let api: InProcessApi;
before(async () => {
  stack = await startRedisAndStore();
  api = await startApi(stack, { TASKLINE_ADMIN_KEYS: ADMIN_KEY });
});
after(async () => {
  await api.close();
  await stack.close();
});

const MCP_LIST = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} };
const MCP_HEADERS = { accept: 'application/json, text/event-stream' };

describe('routes are case-sensitive: only the documented paths exist', () => {
  test('another case of a documented path is the 404 problem on every surface; the path as written is served', async () => {
    const cases: [string, string, string, { body?: unknown; headers?: Record<string, string> }?][] = [
      ['GET', '/lmsp/v1/models', KEY_A],
      ['GET', '/LMSP/V1/models', KEY_A],
      ['GET', '/lmsp/v1/Models', KEY_A],
      ['POST', '/lmsp/v1/TASKS', KEY_A, { body: TASK_BODY }],
      ['GET', `/lmsp/v1/Tasks/${TASK}`, KEY_A],
      ['GET', `/lmsp/v1/RESPONSES/${RESPONSE}`, KEY_A],
      ['GET', '/lmsp/v1/OpenAPI.json', KEY_A],
      ['GET', '/admin/v1/overview', ADMIN_KEY],
      ['GET', '/ADMIN/v1/overview', ADMIN_KEY],
      ['GET', '/admin/v1/Overview', ADMIN_KEY],
      ['GET', '/CONSOLE', ADMIN_KEY],
      ['POST', '/mcp', KEY_A, { body: MCP_LIST, headers: MCP_HEADERS }],
      ['POST', '/MCP', KEY_A, { body: MCP_LIST, headers: MCP_HEADERS }],
    ];
    const served = new Set(['/lmsp/v1/models', '/admin/v1/overview', '/mcp']);
    for (const [method, path, key, opts] of cases) {
      const r = await call(api.base, method, path, { key, skipCheck: true, ...opts });
      if (served.has(path)) {
        // MCP answers for itself (this 2025-era request lacks its session): JSON-RPC, not the api's 404.
        if (path === '/mcp') assert.equal((r.body as { jsonrpc?: string }).jsonrpc, '2.0');
        else assert.equal(r.status, 200, `${method} ${path}`);
        continue;
      }
      assert.equal(r.status, 404, `${method} ${path}: ${r.text.slice(0, 200)}`);
      assert.match(r.headers.get('content-type') ?? '', /^application\/problem\+json/, path);
      assert.equal((r.body as { code: string }).code, 'invalid_request', path);
    }
    // Nothing was made through another case of `/tasks`.
    const made = await scanKeys(stack.redis, '*task_*');
    assert.deepEqual(made, []);
  });
});

describe('OPTIONS needs no credentials', () => {
  const paths: [string, string][] = [
    ['/lmsp/v1/models', 'GET, HEAD, OPTIONS'],
    ['/lmsp/v1/tasks', 'POST, OPTIONS'],
    [`/lmsp/v1/tasks/${TASK}/events`, 'GET, HEAD, OPTIONS'],
    ['/lmsp/v1/responses', 'POST, OPTIONS'],
    [`/lmsp/v1/responses/${RESPONSE}`, 'GET, DELETE, HEAD, OPTIONS'],
    [`/lmsp/v1/responses/${RESPONSE}/cancel`, 'POST, OPTIONS'],
    ['/admin/v1/overview', 'GET, HEAD, OPTIONS'],
    [`/admin/v1/tasks/${TASK}/cancel`, 'POST, OPTIONS'],
  ];

  test('LMSP, the OpenAI routes and the admin API answer 204 with Allow, as with a credential', async () => {
    for (const [path, allow] of paths) {
      const key = path.startsWith('/admin') ? ADMIN_KEY : KEY_A;
      for (const token of [key, null]) {
        const r = await call(api.base, 'OPTIONS', path, { key: token, skipCheck: true });
        assert.equal(r.status, 204, `${path} ${token ? 'with' : 'without'} a credential: ${r.text}`);
        assert.equal(r.headers.get('allow'), allow, path);
      }
      // Only OPTIONS: any other method still needs the credential.
      assert.equal((await call(api.base, 'GET', path, { key: null, skipCheck: true })).status, 401, path);
    }
  });

  test('a CORS preflight gets the same answer and no CORS header: the api does not serve browsers of other origins', async () => {
    for (const [path, allow] of paths) {
      const r = await call(api.base, 'OPTIONS', path, {
        key: null,
        skipCheck: true,
        headers: {
          origin: 'https://app.example',
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'authorization, content-type',
        },
      });
      assert.equal(r.status, 204, path);
      assert.equal(r.headers.get('allow'), allow, path);
      assert.equal(r.headers.get('access-control-allow-origin'), null, path);
    }
  });
});
