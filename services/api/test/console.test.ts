import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ChildProcess } from 'node:child_process';
import { Validator } from '@seriousme/openapi-schema-validator';
import { adminOpenApi } from '@taskline/console';
import { Cluster, exited, LONG, until } from '../../gpu-worker/test/helpers.js';
import { call, KEY_A, spawnApi, type ApiProcess } from './helpers.js';
import { assertAccessible, openBrowser, screenshot, signIn, type Browser } from './console-browser.js';

const ADMIN_KEY = 'admin-key-0123456789abcdef';

/** The routes of the console and its API, each of which a tenant key must be refused on. */
const ROUTES: [string, string][] = [
  ['GET', '/console'],
  ['GET', '/console/tasks/x'],
  ['GET', '/console/assets/console.js'],
  ['GET', '/admin/v1/overview'],
  ['GET', '/admin/v1/tenants'],
  ['GET', '/admin/v1/tenants/tenant-a/tasks'],
  ['GET', '/admin/v1/tasks/TASK'],
  ['GET', '/admin/v1/tasks/TASK/events'],
  ['POST', '/admin/v1/tasks/TASK/cancel'],
  ['POST', '/admin/v1/tasks/TASK/requeue'],
  ['GET', '/admin/v1/workers'],
  ['GET', '/admin/v1/slo'],
  ['GET', '/admin/v1/openapi.json'],
];

describe('operator console in a real browser', () => {
  let cluster: Cluster;
  let api: ApiProcess;
  let worker: ChildProcess;
  let browser: Browser;

  const createTask = async (input: Record<string, unknown> = { model: 'tiny-chat', input: 'Hello' }) => {
    const res = await call(api.base, 'POST', '/lmsp/v1/tasks', {
      key: KEY_A,
      body: { type: 'response', input, on_restart: 'fail' },
    });
    assert.equal(res.status, 202, res.text);
    return (res.body as { id: string }).id;
  };

  before(async () => {
    cluster = await Cluster.start();
    api = await spawnApi(cluster.redis.url, { TASKLINE_ADMIN_KEYS: ADMIN_KEY, TASKLINE_MODELS: 'tiny-chat' });
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

  it("lists a created task in its tenant's list", async () => {
    const { page } = browser;
    const id = await createTask();
    await page.goto(`${api.base}/console#/tenants/tenant-a`);
    await page.getByRole('link', { name: id }).waitFor();
    await screenshot(page, 'tenant-tasks');
    await assertAccessible(page, 'tenant tasks');
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
    assert.ok(text.length > 0);
    assert.equal(await page.locator('#task-output').textContent(), text);
    await screenshot(page, 'task-followed');
    await assertAccessible(page, 'task page');
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
    assert.deepEqual(await res.json(), adminOpenApi());
  });

  it('shows a backlog building on the overview when workers stop', async () => {
    const { page } = browser;
    worker.kill('SIGKILL');
    await exited(worker);
    const ids = [await createTask(), await createTask(), await createTask()];
    await signIn(page, api.base, ADMIN_KEY);
    await until('the backlog on the overview', async () => {
      const text = await page.locator('[data-queued="tiny-chat"]').textContent();
      return Number(text) >= ids.length ? true : undefined;
    });
    await page.getByRole('link', { name: 'tenant-a' }).waitFor();
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
    assert.ok(body.next_cursor);
  });
});
