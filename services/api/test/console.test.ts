import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ChildProcess } from 'node:child_process';
import { Validator } from '@seriousme/openapi-schema-validator';
import { adminOpenApi } from '@taskline/console';
import { schedulerKeys } from '@taskline/engine/keys';
import { EngineStack, exited, LONG, until } from '@taskline/test-support/engine-stack';
import { KEY_A, spawnApi, type ApiProcess } from './helpers.js';
import { assertAccessible, openBrowser, screenshot, signIn, type Browser } from './console-browser.js';

const ADMIN_KEY = 'admin-key-0123456789abcdef';
const ADMIN = { Authorization: `Bearer ${ADMIN_KEY}` };
/** Open streams per operator (and tenant) in this file's api: low, so the cap is reached in a test. */
const MAX_STREAMS = 4;

/** The SSE frames of a response, one at a time (comments included, as `:` lines). */
async function* sseFrames(res: Response): AsyncGenerator<Record<string, string>> {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let at: number;
    while ((at = buf.indexOf('\n\n')) >= 0) {
      const frame = buf.slice(0, at);
      buf = buf.slice(at + 2);
      yield Object.fromEntries(
        frame.split('\n').map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]),
      );
    }
  }
}

/** The next frame that `pick` accepts. */
async function nextFrame(
  frames: AsyncGenerator<Record<string, string>>,
  pick: (f: Record<string, string>) => boolean,
): Promise<Record<string, string>> {
  for (;;) {
    const { value, done } = await frames.next();
    assert.ok(!done, 'the stream ended');
    if (pick(value)) return value;
  }
}

/** The routes of the console and its API, each of which a tenant key must be refused on. */
const ROUTES: [string, string][] = [
  ['GET', '/console'],
  ['GET', '/console/tasks/x'],
  ['GET', '/console/assets/console.js'],
  ['GET', '/admin/v1/overview'],
  ['GET', '/admin/v1/overview/events'],
  ['GET', '/admin/v1/tenants'],
  ['GET', '/admin/v1/tenants/tenant-a/tasks'],
  ['GET', '/admin/v1/tenants/tenant-a/tasks/events'],
  ['GET', '/admin/v1/tasks/TASK'],
  ['GET', '/admin/v1/tasks/TASK/events'],
  ['POST', '/admin/v1/tasks/TASK/cancel'],
  ['POST', '/admin/v1/tasks/TASK/requeue'],
  ['GET', '/admin/v1/workers'],
  ['GET', '/admin/v1/workers/events'],
  ['GET', '/admin/v1/slo'],
  ['GET', '/admin/v1/openapi.json'],
];

describe('operator console in a real browser', () => {
  let cluster: EngineStack;
  let api: ApiProcess;
  let worker: ChildProcess;
  let browser: Browser;

  const created: string[] = [];
  const createTask = async (
    input: Record<string, unknown> = { model: 'tiny-chat', input: 'Hello' },
    headers: Record<string, string> = {},
  ) => {
    const res = await fetch(`${api.base}/lmsp/v1/tasks`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${KEY_A}`, 'Content-Type': 'application/json', ...headers },
      body: JSON.stringify({ type: 'response', input, on_restart: 'fail' }),
    });
    const text = await res.text();
    assert.equal(res.status, 202, text);
    const { id } = JSON.parse(text) as { id: string };
    created.push(id);
    return id;
  };

  before(async () => {
    cluster = await EngineStack.start();
    api = await spawnApi(cluster.redis.url, {
      TASKLINE_ADMIN_KEYS: ADMIN_KEY,
      TASKLINE_MODELS: 'tiny-chat',
      TASKLINE_MAX_STREAMS: String(MAX_STREAMS),
      // Heartbeats a test can wait for (and a stream lease of three of them).
      TASKLINE_SSE_HEARTBEAT_MS: '500',
    });
    // Slow steps: a long generation lasts seconds, long enough to watch live and to cancel.
    worker = cluster.startWorker({ TASKLINE_WORKER_MIN_STEP_MS: '60' });
    browser = await openBrowser();
  });

  after(async () => {
    await browser?.close();
    api?.child.kill('SIGTERM');
    if (api) await api.exited;
    await cluster?.stop();
  });

  it('signs in with an admin key and shows the overview', async () => {
    const { page } = browser;
    await signIn(page, api.base, ADMIN_KEY);
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page.getByText('Prometheus is not configured').waitFor();
    await until('a worker on the overview', async () =>
      (await page.getByText(/1 live workers/).count()) > 0 ? true : undefined,
    );
    await screenshot(page, 'overview');
    await assertAccessible(page, 'overview');
    await page.getByRole('link', { name: 'Workers' }).click();
    await page
      .getByText(/^worker-/)
      .first()
      .waitFor();
    await page.getByText(/Scheduler leader: 127\.0\.0\.1:\d+/).waitFor();
    await screenshot(page, 'workers');
    await assertAccessible(page, 'workers');
  });

  it("lists a created task in its tenant's list; its page shows the Idempotency-Key to operators only", async () => {
    const { page } = browser;
    const key = `order-${Date.now()}`;
    const urls: string[] = [];
    page.on('request', (r) => urls.push(new URL(r.url()).pathname));
    await page.goto(`${api.base}/console#/tenants/tenant-a`);
    await page.getByText('End of the list.').waitFor();
    // Created while the list is open: the list's stream brings it.
    const id = await createTask(undefined, { 'Idempotency-Key': key });
    await page.getByRole('link', { name: id }).waitFor();
    assert.ok(urls.includes('/admin/v1/tenants/tenant-a/tasks/events'), 'the list follows its stream');
    await screenshot(page, 'tenant-tasks');
    await assertAccessible(page, 'tenant tasks');
    await page.getByRole('link', { name: id }).click();
    await page.locator('dd', { hasText: key }).waitFor();
    const detail = await fetch(`${api.base}/admin/v1/tasks/${id}`, { headers: ADMIN });
    assert.equal(((await detail.json()) as { task: { idempotency_key: string } }).task.idempotency_key, key);
    // The tenant's own reads never carry it back (nor would another tenant's).
    for (const path of [`/lmsp/v1/tasks/${id}`, `/lmsp/v1/responses/resp_${id.slice('task_'.length)}`]) {
      const res = await fetch(api.base + path, { headers: { Authorization: `Bearer ${KEY_A}` } });
      assert.equal(res.status, 200, path);
      assert.ok(!(await res.text()).includes(key), path);
    }
  });

  it("shows a tenant's webhook endpoints and their newest delivery attempts; enables a disabled one", async () => {
    const { page } = browser;
    const tenantKey = { Authorization: `Bearer ${KEY_A}`, 'Content-Type': 'application/json' };
    // A name that does not resolve here: every attempt fails, and is logged as such.
    const url = 'https://hooks.invalid/taskline';
    const made = await fetch(`${api.base}/lmsp/v1/webhooks`, {
      method: 'POST',
      headers: tenantKey,
      body: JSON.stringify({ url, events: ['task.status'] }),
    });
    assert.equal(made.status, 201);
    const endpoint = (await made.json()) as { id: string; secret: string };
    await new Promise((res) => setTimeout(res, 1100)); // the create path's cached answer lapses
    const id = await createTask();
    type Listed = { data: { id: string; enabled: boolean; attempts: { message: string }[] }[] };
    const listed = async () =>
      (await (
        await fetch(`${api.base}/admin/v1/tenants/tenant-a/webhooks`, { headers: ADMIN })
      ).json()) as Listed;
    const first = `msg_${id}_1`;
    await until(
      'the first delivery attempt logged',
      async () => ((await listed()).data[0]?.attempts.some((a) => a.message === first) ? true : undefined),
      60_000,
    );
    await page.goto(`${api.base}/console#/tenants/tenant-a`);
    await page.getByRole('heading', { name: 'Webhook endpoints' }).waitFor();
    await page.getByRole('heading', { name: url }).waitFor();
    await page.getByRole('cell', { name: first, exact: true }).first().waitFor();
    assert.ok(!(await page.content()).includes(endpoint.secret), 'no secret on the page');
    await screenshot(page, 'tenant-webhooks');
    await assertAccessible(page, 'tenant webhooks');
    // Disabled by its tenant: the panel offers to enable it again.
    const patched = await fetch(`${api.base}/lmsp/v1/webhooks/${endpoint.id}`, {
      method: 'PATCH',
      headers: tenantKey,
      body: JSON.stringify({ enabled: false }),
    });
    assert.equal(patched.status, 200);
    await page.getByRole('button', { name: 'Refresh' }).click();
    await page.getByRole('button', { name: 'Enable' }).click();
    await until('the endpoint enabled again', async () =>
      (await listed()).data[0]?.enabled ? true : undefined,
    );
    await page.getByRole('button', { name: 'Enable' }).waitFor({ state: 'detached' });
    const removed = await fetch(`${api.base}/lmsp/v1/webhooks/${endpoint.id}`, {
      method: 'DELETE',
      headers: tenantKey,
    });
    assert.equal(removed.status, 204);
  });

  it('follows a task page live to its end', async () => {
    const { page } = browser;
    const id = await createTask(LONG);
    await page.goto(`${api.base}/console#/tasks/${id}`);
    // The page opens while the task still runs, and sees its end arrive.
    await page.locator('#stream-state', { hasText: 'Following events' }).waitFor();
    await page.locator('#stream-state', { hasText: 'Ended.' }).waitFor({ timeout: 120_000 });
    await page.locator('#task-status', { hasText: 'succeeded' }).waitFor();
    const { events } = await cluster.store.events(id, 0);
    const items = await page.locator('#task-events li').allTextContents();
    assert.deepEqual(
      items.map((t) => Number(t.split(' ')[0])),
      events.map((e) => e.seq),
      'every event once, in order',
    );
    const text = events
      .filter((e) => e.type === 'response.output_text.delta')
      .map((e) => (JSON.parse(e.data) as { delta: string }).delta)
      .join('');
    assert.ok(text.length > 0, 'text.length > 0');
    assert.equal(await page.locator('#task-output').textContent(), text);
    await screenshot(page, 'task-followed');
    await assertAccessible(page, 'task page');
    // The worker renewed its lease while it ran (every third of the 1 s lease): its heartbeat says so.
    await page.getByRole('link', { name: 'Workers' }).click();
    await until('lease renewals on the workers page', async () => {
      const counts = await page.locator('[data-renewals]').allTextContents();
      return counts.some((c) => Number(c) > 0) ? true : undefined;
    });
    await screenshot(page, 'workers-renewals');
  });

  it('cancels a running task from the console', async () => {
    const { page } = browser;
    const id = await createTask(LONG);
    await cluster.waitFor(id, 'running', (t) => t.status === 'running');
    await page.goto(`${api.base}/console#/tasks/${id}`);
    await screenshot(page, 'task-before-cancel');
    await page.getByRole('button', { name: 'Cancel task' }).click();
    await page.getByRole('button', { name: 'Yes, cancel task' }).click();
    await page.locator('#task-status', { hasText: 'cancelled' }).waitFor({ timeout: 60_000 });
    const ended = await cluster.waitForEnd(id);
    assert.equal(ended.status, 'cancelled');
    const events = await cluster.events(id);
    const action = events.find((e) => e.operator_action)?.operator_action as {
      action: string;
      operator: string;
    };
    assert.equal(action.action, 'cancel');
    assert.match(action.operator, /^key:[0-9a-f]{12}$/);
    await page.getByText(`operator ${action.operator}: cancel`).first().waitFor();
    await screenshot(page, 'task-cancelled');
  });

  it('refuses a tenant key on every console and admin route', async () => {
    const id = await createTask();
    for (const [method, path] of ROUTES) {
      const res = await fetch(api.base + path.replace('TASK', id), {
        method,
        headers: { Authorization: `Bearer ${KEY_A}` },
      });
      assert.equal(res.status, 403, `${method} ${path}`);
      assert.equal(((await res.json()) as { code: string }).code, 'forbidden', `${method} ${path}`);
      const none = await fetch(api.base + path.replace('TASK', id), { method });
      // The page shell carries no data and opens without a credential; everything else needs one.
      if (path.startsWith('/admin/')) assert.equal(none.status, 401, `${method} ${path} without credentials`);
    }
    const { page } = browser;
    await page.evaluate(() => sessionStorage.clear());
    await signIn(page, api.base, KEY_A);
    await page.getByRole('alert').filter({ hasText: 'tenant keys never do' }).waitFor();
    assert.equal(await page.getByRole('heading', { name: 'Overview' }).count(), 0);
    assert.equal(await page.getByRole('button', { name: 'Sign out' }).isVisible(), false);
    await screenshot(page, 'tenant-key-refused');
    await assertAccessible(page, 'sign-in page');
  });

  it('documents /admin/v1 in a valid OpenAPI 3.1 document, served to operators', async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(adminOpenApi()));
    assert.equal(validator.version, '3.1');
    assert.ok(result.valid, JSON.stringify(result.errors, null, 1));
    const res = await fetch(`${api.base}/admin/v1/openapi.json`, {
      headers: { Authorization: `Bearer ${ADMIN_KEY}` },
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    const served = await res.json();
    assert.deepEqual(served, adminOpenApi());
    const { page } = browser;
    await page.setContent(
      `<title>openapi.json</title><pre>${JSON.stringify(served, null, 1).replace(/</g, '&lt;')}</pre>`,
    );
    await screenshot(page, 'admin-openapi');
  });

  it('pushes the overview as SSE: ids, heartbeats, Last-Event-ID resume, the operator stream cap', async () => {
    // The console's own overview stream is open throughout, and counts under the same cap.
    const { page } = browser;
    await signIn(page, api.base, ADMIN_KEY);
    await page.locator('[data-queued="tiny-chat"]').waitFor();
    const open = (headers: Record<string, string> = {}, signal?: AbortSignal) =>
      fetch(`${api.base}/admin/v1/overview/events`, { headers: { ...ADMIN, ...headers }, signal });
    const first = new AbortController();
    const res = await open({}, first.signal);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    const frames = sseFrames(res);
    const a = await nextFrame(frames, (f) => f.event === 'overview');
    const snapshot = JSON.parse(a.data!) as { at: number; models: { model: string }[] };
    assert.equal(Number(a.id), snapshot.at);
    assert.ok(
      snapshot.models.some((m) => m.model === 'tiny-chat'),
      "snapshot.models.some((m) => m.model === 'tiny-chat')",
    );
    await nextFrame(frames, (f) => f[''] === 'keep-alive');
    const b = await nextFrame(frames, (f) => f.event === 'overview');
    assert.ok(Number(b.id) > Number(a.id), 'ids increase');
    first.abort();
    // Resumed: only snapshots newer than the last one seen.
    const again = new AbortController();
    const resumed = await open({ 'Last-Event-ID': b.id! }, again.signal);
    const c = await nextFrame(sseFrames(resumed), (f) => f.event === 'overview');
    assert.ok(Number(c.id) > Number(b.id), 'Number(c.id) > Number(b.id)');
    again.abort();
    for (const bad of ['x', '-1', String(Date.now() + 3_600_000)]) {
      const refused = await open({ 'Last-Event-ID': bad });
      assert.equal(refused.status, 400, bad);
      assert.equal(((await refused.json()) as { code: string }).code, 'invalid_request');
    }
    // Counted like task streams, under the operator's cap.
    const held: AbortController[] = [];
    let capped: globalThis.Response | null = null;
    for (let i = 0; i <= MAX_STREAMS && !capped; i++) {
      const c = new AbortController();
      const r = await open({}, c.signal);
      if (r.status === 200) held.push(c);
      else capped = r;
    }
    assert.equal(capped?.status, 429);
    assert.equal(((await capped!.json()) as { code: string }).code, 'rate_limited');
    for (const c of held) c.abort();
    await until('a slot freed by a closed stream', async () => {
      const c = new AbortController();
      const r = await open({}, c.signal);
      c.abort();
      return r.status === 200 ? true : undefined;
    });
    await screenshot(page, 'overview-stream');
    await page.getByRole('button', { name: 'Sign out' }).click();
  });

  it('shows a backlog building on the overview when workers stop, pushed over SSE', async () => {
    const { page } = browser;
    worker.kill('SIGKILL');
    await exited(worker);
    // The leader hears the worker's stream end and withdraws what it lent of its slots: a create
    // taking one would be queued in BullMQ for a worker that is gone, not shown waiting here.
    await until("the dead worker's slots withdrawn", async () =>
      (await cluster.store.redis.hexists(schedulerKeys.loans, 'm:tiny-chat')) === 0 ? true : undefined,
    );
    const urls: string[] = [];
    page.on('request', (r) => urls.push(new URL(r.url()).pathname));
    const ids = [await createTask(), await createTask(), await createTask()];
    await signIn(page, api.base, ADMIN_KEY);
    await until('the backlog on the overview', async () => {
      const text = await page.locator('[data-queued="tiny-chat"]').textContent();
      return Number(text) >= ids.length ? true : undefined;
    });
    await page.getByRole('link', { name: 'tenant-a' }).waitFor();
    assert.ok(urls.includes('/admin/v1/overview/events'), 'the overview follows its stream');
    assert.ok(!urls.includes('/admin/v1/overview'), 'and never polls');
    // Exact counts: every unfinished task of the tenant by status, as the records say.
    const truth = async () => {
      const counts: Record<string, number> = {};
      for (const id of created) {
        const t = await cluster.store.get(id);
        if (t && !['succeeded', 'failed', 'cancelled'].includes(t.status))
          counts[t.status] = (counts[t.status] ?? 0) + 1;
      }
      return counts;
    };
    await until('exact unfinished counts for tenant-a', async () => {
      const before = await truth();
      const res = await fetch(`${api.base}/admin/v1/tenants?q=tenant-a`, { headers: ADMIN });
      const row = (
        (await res.json()) as { data: { tenant: string; unfinished: Record<string, number> }[] }
      ).data.find((t) => t.tenant === 'tenant-a');
      const after = await truth();
      const same = (x: Record<string, number> = {}, y: Record<string, number> = {}) =>
        JSON.stringify(Object.entries(x).sort()) === JSON.stringify(Object.entries(y).sort());
      return (before.queued ?? 0) >= ids.length && same(before, after) && same(row?.unfinished, before)
        ? true
        : undefined;
    });
    await page.locator('[data-unfinished="tenant-a"]', { hasText: 'queued' }).waitFor();
    await screenshot(page, 'overview-backlog');
    // A queued task nobody takes can be offered again; the event names the operator.
    const admin = { Authorization: `Bearer ${ADMIN_KEY}` };
    const res = await fetch(`${api.base}/admin/v1/tasks/${ids[0]}/requeue`, {
      method: 'POST',
      headers: admin,
    });
    assert.equal(res.status, 200);
    const events = await cluster.events(ids[0]!);
    assert.equal(events.at(-1)!.reason, 'operator_requeue');
    const bad = await fetch(`${api.base}/admin/v1/tenants/tenant-a/tasks?status=bogus`, { headers: admin });
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as { code: string }).code, 'invalid_request');
    const page2 = await fetch(`${api.base}/admin/v1/tenants/tenant-a/tasks?status=queued&limit=2`, {
      headers: admin,
    });
    const body = (await page2.json()) as { data: { id: string }[]; next_cursor: string | null };
    assert.equal(body.data.length, 2);
    assert.ok(body.next_cursor, 'body.next_cursor');
  });

  it('ends an open overview stream with a retry hint when the api shuts down', async () => {
    const res = await fetch(`${api.base}/admin/v1/overview/events`, { headers: ADMIN });
    const frames = sseFrames(res);
    await nextFrame(frames, (f) => f.event === 'overview');
    api.child.kill('SIGTERM');
    // The reader is told when to come back (to another replica), as task streams are.
    const hint = await nextFrame(frames, (f) => f.retry !== undefined);
    assert.ok(Number(hint.retry) > 0, 'Number(hint.retry) > 0');
    assert.equal((await frames.next()).done, true);
    await screenshot(browser.page, 'api-shut-down');
  });
});
