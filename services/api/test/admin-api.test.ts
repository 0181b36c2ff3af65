/** `/admin/v1` over HTTP without a browser: its refusals, against an in-process api and a Redis of its own. */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { ConfigError } from '@taskline/config';
import { adminOpenApi } from '@taskline/console';
import { configSetAll } from '@taskline/testing';
import {
  call,
  KEY_A,
  KEY_B,
  startApi,
  startRedisAndStore,
  TASK_BODY,
  type InProcessApi,
  type RedisAndStore,
} from './helpers.js';

const ADMIN_KEY = 'admin-key-0123456789abcdef';

let stack: RedisAndStore;
let api: InProcessApi;
before(async () => {
  stack = await startRedisAndStore();
  api = await startApi(stack, { TASKLINE_ADMIN_KEYS: ADMIN_KEY });
});
after(async () => {
  await api?.close();
  await stack?.close();
});

/** One request with `token` as its bearer (none when null): status, headers and problem body. */
async function admin(method: string, path: string, token: string | null = ADMIN_KEY) {
  const res = await fetch(api.base + path, {
    method,
    headers: token === null ? {} : { Authorization: `Bearer ${token}` },
  });
  const text = await res.text();
  const type = res.headers.get('content-type') ?? '';
  return {
    status: res.status,
    headers: res.headers,
    type,
    body: (type.includes('json') && text ? JSON.parse(text) : {}) as { code?: string; detail?: string },
  };
}

describe('operator credentials', () => {
  it('a token that is no credential is 401 with WWW-Authenticate; a tenant key 403', async () => {
    for (const token of [null, 'garbage-token', 'a.b.c']) {
      const r = await admin('GET', '/admin/v1/overview', token);
      assert.equal(r.status, 401, String(token));
      assert.equal(r.body.code, 'unauthorized', String(token));
      assert.match(r.headers.get('www-authenticate') ?? '', /^Bearer/, String(token));
    }
    const tenant = await admin('GET', '/admin/v1/overview', KEY_A);
    assert.equal(tenant.status, 403);
    assert.equal(tenant.body.code, 'forbidden');
    // The page shell refuses the same way when a credential is presented.
    assert.equal((await admin('GET', '/console', 'garbage-token')).status, 401);
    assert.equal((await admin('GET', '/console', KEY_A)).status, 403);
    assert.equal((await admin('GET', '/admin/v1/overview')).status, 200);
  });

  it("start-up refuses a tenant's key that is also an operator's, or one key given to two tenants", async () => {
    // Either would hand its holder another's rights: the console to a tenant, one tenant's tasks to another.
    const sha = createHash('sha256').update(KEY_A).digest('hex');
    const envs: Record<string, string>[] = [
      { TASKLINE_ADMIN_KEYS: KEY_A },
      { TASKLINE_ADMIN_KEYS: `${ADMIN_KEY},sha256:${sha}` },
      { TASKLINE_API_KEYS: `tenant-a:${KEY_A},tenant-b:${KEY_A}` },
    ];
    for (const env of envs) {
      let served: InProcessApi;
      try {
        served = await startApi(stack, env);
      } catch (err) {
        assert.ok(err instanceof ConfigError, String(err));
        assert.match(err.message, /TASKLINE_API_KEYS/);
        assert.ok(!err.message.includes(KEY_A) && !err.message.includes(sha), 'the key is never told');
        continue;
      }
      // What the key's holder gets where such a configuration is served.
      const opened = await call(served.base, 'GET', '/admin/v1/overview', { key: KEY_A, skipCheck: true });
      const created = await call(served.base, 'POST', '/lmsp/v1/tasks', { key: KEY_A, body: TASK_BODY });
      const owner = (await stack.worker.get((created.body as { id: string }).id))?.tenant;
      const seen = `/admin/v1/overview ${opened.status}, its task made for ${owner}`;
      await served.close();
      assert.fail(`${JSON.stringify(env)} was served: ${seen}`);
    }
    // The same key listed twice for one tenant is one credential, and fine.
    const twice = await startApi(stack, {
      TASKLINE_API_KEYS: `tenant-a:${KEY_A},tenant-a:${KEY_A},tenant-b:${KEY_B}`,
    });
    await twice.close();
  });
});

describe('methods', () => {
  it('a known path asked with a method it does not take is 405 with Allow, as on LMSP', async () => {
    const task = 'task_00000000000000000000000000';
    const cases: [string, string, string][] = [
      ['DELETE', `/admin/v1/tasks/${task}`, 'GET, HEAD, OPTIONS'],
      ['PUT', `/admin/v1/tasks/${task}/cancel`, 'POST, OPTIONS'],
      ['GET', `/admin/v1/tasks/${task}/cancel`, 'POST, OPTIONS'],
      ['GET', `/admin/v1/tasks/${task}/requeue`, 'POST, OPTIONS'],
      ['POST', '/admin/v1/overview', 'GET, HEAD, OPTIONS'],
      ['POST', '/admin/v1/overview/events', 'GET, HEAD, OPTIONS'],
      ['PATCH', '/admin/v1/tenants', 'GET, HEAD, OPTIONS'],
      ['POST', '/admin/v1/tenants/tenant-a/tasks', 'GET, HEAD, OPTIONS'],
      ['POST', '/admin/v1/tenants/tenant-a/tasks/events', 'GET, HEAD, OPTIONS'],
      ['POST', `/admin/v1/tasks/${task}/events`, 'GET, HEAD, OPTIONS'],
      ['DELETE', '/admin/v1/workers', 'GET, HEAD, OPTIONS'],
      ['POST', '/admin/v1/workers/events', 'GET, HEAD, OPTIONS'],
      ['POST', '/admin/v1/slo', 'GET, HEAD, OPTIONS'],
      ['POST', '/admin/v1/openapi.json', 'GET, HEAD, OPTIONS'],
    ];
    for (const [method, path, allow] of cases) {
      const r = await admin(method, path);
      assert.equal(r.status, 405, `${method} ${path}`);
      assert.match(r.type, /^application\/problem\+json/, `${method} ${path}`);
      assert.equal(r.body.code, 'invalid_request', `${method} ${path}`);
      assert.equal(r.headers.get('allow'), allow, `${method} ${path}`);
    }
    // Still an operator's question: without a credential it is refused before any route.
    assert.equal((await admin('DELETE', `/admin/v1/tasks/${task}`, null)).status, 401);
    assert.equal((await admin('GET', '/admin/v1/nope')).status, 404);
  });

  it('OPTIONS answers 204 with Allow, as LMSP does', async () => {
    const lmsp = await admin('OPTIONS', '/lmsp/v1/models', KEY_A);
    for (const path of ['/admin/v1/overview', '/admin/v1/tasks/task_x/cancel']) {
      const r = await admin('OPTIONS', path);
      assert.equal(r.status, lmsp.status, path);
      assert.equal(r.status, 204, path);
      assert.match(r.headers.get('allow') ?? '', /OPTIONS$/, path);
    }
  });
});

describe('limit usage', () => {
  it("a tenant's active_tasks counts its unfinished tasks, not the ones that ended", async () => {
    const lmsp = (method: string, path: string, body?: unknown) =>
      fetch(api.base + path, {
        method,
        headers: { Authorization: `Bearer ${KEY_A}`, 'Content-Type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await lmsp('POST', '/lmsp/v1/tasks', {
        type: 'response',
        input: { model: 'tiny-chat', input: 'Hello' },
      });
      assert.equal(res.status, 202);
      ids.push(((await res.json()) as { id: string }).id);
    }
    // No worker here: the tasks stay queued until cancelled, all but the last.
    for (const id of ids.slice(0, -1))
      assert.equal((await lmsp('POST', `/lmsp/v1/tasks/${id}/cancel`)).status, 200);
    const res = await fetch(`${api.base}/admin/v1/tenants?q=tenant-a`, {
      headers: { Authorization: `Bearer ${ADMIN_KEY}` },
    });
    const row = (
      (await res.json()) as { data: { tenant: string; unfinished: object; limits: object }[] }
    ).data.find((t) => t.tenant === 'tenant-a')!;
    assert.deepEqual(row.unfinished, { queued: 1 });
    assert.equal((row.limits as { active_tasks: number }).active_tasks, 1);
  });
});

describe('bad input', () => {
  it('an integer parameter is decimal digits: any other form of a number is 400 invalid_request', async () => {
    for (const path of [
      '/tenants?limit=',
      '/tenants?offset=',
      '/tenants/tenant-a/tasks?limit=',
      '/tenants/tenant-a/tasks?max_age_s=',
    ])
      for (const bad of ['1e1', '0x10', '+5', '5.0', '%205', '05']) {
        const r = await admin('GET', `/admin/v1${path}${bad}`);
        assert.equal(r.status, 400, `${path}${bad}`);
        assert.equal(r.body.code, 'invalid_request', `${path}${bad}`);
        assert.match(r.body.detail ?? '', /must be an integer/, `${path}${bad}`);
      }
  });
});

describe('the page', () => {
  it('an asset it does not have is 404, not the page in its place', async () => {
    const r = await admin('GET', '/console/assets/console-old.js', null);
    assert.equal(r.status, 404);
    assert.match(r.type, /^application\/problem\+json/);
    assert.equal((await admin('GET', '/console/assets/console.js', null)).status, 200);
    // Every other path is the single-page app.
    assert.match((await admin('GET', '/console/tasks/x', null)).type, /^text\/html/);
  });
});

describe('the OpenAPI document', () => {
  type Operation = { responses: Record<string, { content?: Record<string, unknown> }> };
  const doc = adminOpenApi() as { paths: Record<string, Record<string, Operation>> };
  /** The operation `path` (under /admin/v1) is answered by, as its template reads. */
  const operationOf = (method: string, path: string): [string, Operation] => {
    const bare = path.slice('/admin/v1'.length).split('?')[0]!;
    for (const [template, item] of Object.entries(doc.paths))
      if (new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(bare))
        return [`${method} ${template}`, item[method.toLowerCase()]!];
    throw new Error(`${path} is not in the document`);
  };

  it("documents every status and content type its routes answer with, bad input's too", async () => {
    const id = 'task_00000000000000000000000000';
    const json = { 'Content-Type': 'application/json' };
    const cases: [string, string, { body?: string; headers?: Record<string, string> }?][] = [
      ['GET', '/admin/v1/overview'],
      ['GET', '/admin/v1/overview/events', { headers: { 'Last-Event-ID': 'x' } }],
      ['GET', '/admin/v1/tenants'],
      ['GET', '/admin/v1/tenants?limit=0'],
      ['GET', '/admin/v1/tenants/tenant-a/tasks'],
      ['GET', '/admin/v1/tenants/no%20such/tasks'],
      ['GET', '/admin/v1/tenants/tenant-a/tasks?cursor=forged'],
      ['GET', '/admin/v1/tenants/tenant-a/tasks/events?cursor=1:0'],
      ['GET', `/admin/v1/tasks/${id}`],
      ['GET', '/admin/v1/tasks/%E0%A4%A'],
      ['GET', `/admin/v1/tasks/${id}/events`],
      ['GET', '/admin/v1/tasks/%E0%A4%A/events'],
      ['POST', `/admin/v1/tasks/${id}/cancel`],
      ['POST', `/admin/v1/tasks/${id}/cancel`, { body: '{not json', headers: json }],
      [
        'POST',
        `/admin/v1/tasks/${id}/cancel`,
        { body: JSON.stringify({ x: 'y'.repeat(4096) }), headers: json },
      ],
      ['POST', `/admin/v1/tasks/${id}/requeue`, { body: '{not json', headers: json }],
      [
        'POST',
        `/admin/v1/tasks/${id}/requeue`,
        { body: JSON.stringify({ x: 'y'.repeat(4096) }), headers: json },
      ],
      ['GET', '/admin/v1/workers'],
      ['GET', '/admin/v1/slo'],
      ['GET', '/admin/v1/openapi.json'],
    ];
    const undocumented: string[] = [];
    for (const [method, path, opts = {}] of cases) {
      const res = await fetch(api.base + path, {
        method,
        body: opts.body,
        headers: { Authorization: `Bearer ${ADMIN_KEY}`, ...opts.headers },
      });
      const type = (res.headers.get('content-type') ?? '').split(';')[0]!;
      await res.body?.cancel();
      const [name, op] = operationOf(method, path);
      const documented = op.responses[String(res.status)];
      if (!documented) undocumented.push(`${name} answered ${res.status} to ${path}`);
      else if (!documented.content?.[type]) undocumented.push(`${name} ${res.status} is ${type}`);
    }
    assert.deepEqual(undocumented, []);
  });

  it('documents 503 unavailable, which a Redis that cannot take the request now gets', async () => {
    const { id } = (await call(api.base, 'POST', '/lmsp/v1/tasks', { body: TASK_BODY })).body as {
      id: string;
    };
    // Full (maxmemory reached, noeviction): the cancel's write is refused with OOM. On every
    // primary of a cluster: CONFIG SET reaches one node, perhaps not the task's.
    await configSetAll(stack.redis, 'maxmemory-policy', 'noeviction');
    await configSetAll(stack.redis, 'maxmemory', '1');
    let r: Awaited<ReturnType<typeof admin>>;
    try {
      r = await admin('POST', `/admin/v1/tasks/${id}/cancel`);
    } finally {
      await configSetAll(stack.redis, 'maxmemory', '0');
    }
    assert.equal(r.status, 503);
    assert.equal(r.body.code, 'unavailable');
    const [name, op] = operationOf('POST', `/admin/v1/tasks/${id}/cancel`);
    assert.ok(op.responses['503'], `${name} does not document 503`);
  });
});

describe('webhook views', () => {
  it('an operator sees a tenant’s endpoints without their secrets, with failures and attempts, and enables one again', async () => {
    const created = await fetch(`${api.base}/lmsp/v1/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: 'https://hooks.example.com/ops' }),
    });
    const hook = (await created.json()) as { id: string; secret: string };
    await fetch(`${api.base}/lmsp/v1/webhooks/${hook.id}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' },
      body: JSON.stringify({ enabled: false }),
    });
    const res = await fetch(`${api.base}/admin/v1/tenants/tenant-a/webhooks`, {
      headers: { authorization: `Bearer ${ADMIN_KEY}` },
    });
    const text = await res.text();
    assert.equal(res.status, 200);
    assert.ok(!text.includes(hook.secret) && !text.includes('whsec_'), 'no secret');
    const listed = (JSON.parse(text) as { data: { id: string; enabled: boolean; failures_in_row: number }[] })
      .data;
    assert.deepEqual(
      listed.map((e) => [e.id, e.enabled, e.failures_in_row]),
      [[hook.id, false, 0]],
    );
    const enabled = await admin('POST', `/admin/v1/tenants/tenant-a/webhooks/${hook.id}/enable`);
    assert.equal(enabled.status, 200);
    assert.equal((enabled.body as { enabled?: boolean }).enabled, true);
    const missing = await admin('POST', '/admin/v1/tenants/tenant-b/webhooks/ep_none/enable');
    assert.equal(missing.status, 404);
    assert.equal(missing.body.code, 'webhook_not_found');
    assert.equal((await admin('GET', '/admin/v1/tenants/tenant-a/webhooks', KEY_A)).status, 403);
  });

  it('a Redis this api cannot reach is 503 unavailable on enable and redeliver, not a missing endpoint', async () => {
    const cut = await startApi(stack, { TASKLINE_ADMIN_KEYS: ADMIN_KEY });
    try {
      cut.redis.disconnect();
      for (const action of ['enable', 'redeliver?since=0']) {
        const res = await fetch(`${cut.base}/admin/v1/tenants/tenant-a/webhooks/ep_any/${action}`, {
          method: 'POST',
          headers: { Authorization: `Bearer ${ADMIN_KEY}` },
        });
        const body = (await res.json()) as { code?: string };
        assert.equal(res.status, 503, `${action}: ${JSON.stringify(body)}`);
        assert.equal(body.code, 'unavailable', action);
        assert.ok(res.headers.get('retry-after'), `${action} names a Retry-After`);
      }
    } finally {
      await cut.close();
    }
  });
});
