/**
 * The console page against an in-process api behind a proxy: its live views when the api replica
 * goes away (the page must keep following, as any LMSP client does, once a replica answers
 * again), and what it shows for bad input.
 */
import assert from 'node:assert/strict';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, it } from 'node:test';
import { until } from '@taskline/testing';
import {
  createTask,
  delta,
  nextQueued,
  startApi,
  startRedisAndStore,
  type InProcessApi,
  type RedisAndStore,
} from './helpers.js';
import { openBrowser, screenshot, signIn, type Browser } from './console-browser.js';

const ADMIN_KEY = 'admin-key-0123456789abcdef';

/**
 * A load balancer in front of the api: while `down` (no replica to send to) it answers as
 * HAProxy does, 503 with an HTML page, and it cuts the streams it was carrying.
 */
class Balancer {
  down = false;
  refused = 0;
  /** The paths of the requests refused, in order. */
  readonly refusedPaths: string[] = [];
  base = '';
  private readonly open = new Set<ServerResponse>();
  private readonly server: Server;

  constructor(upstream: string) {
    const target = new URL(upstream);
    this.server = createServer((req: IncomingMessage, res: ServerResponse) => {
      if (this.down) {
        this.refused++;
        this.refusedPaths.push(req.url ?? '');
        res.writeHead(503, { 'Content-Type': 'text/html', 'Retry-After': '1' });
        res.end('<html><body><h1>503 Service Unavailable</h1>No server is available.</body></html>');
        return;
      }
      this.open.add(res);
      res.on('close', () => this.open.delete(res));
      const up = request(
        { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
        (reply) => {
          res.writeHead(reply.statusCode!, reply.headers);
          reply.pipe(res);
        },
      );
      up.on('error', () => res.destroy());
      res.on('close', () => up.destroy());
      req.pipe(up);
    });
  }

  async listen(): Promise<this> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.base = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** The replica is gone: what it was streaming is cut, new requests find no server. */
  cut(): void {
    this.down = true;
    for (const res of this.open) res.destroy();
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}

let stack: RedisAndStore;
let api: InProcessApi;
let balancer: Balancer;
let browser: Browser;
before(async () => {
  stack = await startRedisAndStore();
  api = await startApi(stack, { TASKLINE_ADMIN_KEYS: ADMIN_KEY });
  balancer = await new Balancer(api.base).listen();
  browser = await openBrowser();
});
after(async () => {
  await browser?.close();
  await balancer?.close();
  await api?.close();
  await stack?.close();
});

/** Signed in afresh through the balancer, on the overview. */
async function signedIn(): Promise<void> {
  const { page } = browser;
  await page.goto(`${balancer.base}/console`);
  await page.evaluate(() => sessionStorage.clear());
  await signIn(page, balancer.base, ADMIN_KEY);
  await page.getByRole('heading', { name: 'Overview' }).waitFor();
}

it('a task page follows on after its replica went away and the balancer answered 503 meanwhile', async () => {
  const { page } = browser;
  const { id } = await createTask(api.base);
  assert.equal(await nextQueued(stack.redis), id);
  const store = stack.worker;
  const { attempt } = await store.claim(id, 'test-worker', 60_000);
  await store.start(id, attempt);
  await store.append(id, attempt, [3], [delta('one')]);

  await signedIn();
  await page.goto(`${balancer.base}/console#/tasks/${id}`);
  await page.locator('#task-output', { hasText: 'one' }).waitFor();

  balancer.cut();
  // The page tried again while no replica answered.
  await until('a reconnect refused by the balancer', async () => (balancer.refused > 0 ? true : undefined));
  await store.append(id, attempt, [3], [delta('two')]);
  balancer.down = false;

  const outcome = await until('the page following on, or giving up', async () => {
    const state = (await page.locator('#stream-state').textContent()) ?? '';
    if (state.startsWith('Not following')) return state;
    return (await page.locator('#task-output').textContent()) === 'onetwo' ? 'followed' : undefined;
  });
  await screenshot(page, 'task-reconnected');
  assert.equal(outcome, 'followed');
  assert.equal(await page.locator('#stream-state').textContent(), 'Following events…');
});

it("a view's first read that the balancer answers 503 is tried again after its Retry-After, not shown as an error", async () => {
  const { page } = browser;
  const { id } = await createTask(api.base);
  assert.equal(await nextQueued(stack.redis), id);
  await signedIn();
  const views = [
    ['#/workers', '/admin/v1/workers', page.getByText('As the leader reported them')],
    [`#/tasks/${id}`, `/admin/v1/tasks/${id}`, page.locator('#task-status', { hasText: 'queued' })],
  ] as const;
  for (const [hash, read, shown] of views) {
    balancer.down = true;
    await page.evaluate((to) => (location.hash = to), hash);
    await until(`${read} refused by the balancer`, async () =>
      balancer.refusedPaths.includes(read) ? true : undefined,
    );
    balancer.down = false;
    const outcome = await until(`${hash} shown, or an error in its place`, async () =>
      (await shown.count()) > 0
        ? 'shown'
        : (await page.getByRole('alert').count()) > 0
          ? await page.getByRole('alert').first().textContent()
          : undefined,
    );
    await screenshot(page, `first-read-retried-${hash.split('/')[1]}`);
    assert.equal(outcome, 'shown', hash);
    balancer.refusedPaths.length = 0;
  }
});

it("a tenant list's filter the api refuses says why, and Enter does not reload the page", async () => {
  const { page } = browser;
  await signedIn();
  await page.goto(`${balancer.base}/console#/tenants/tenant-a`);
  await page.getByText('End of the list.').waitFor();
  const loads: string[] = [];
  page.on('load', () => loads.push(page.url()));
  // Whitespace is never in a model id: the api answers 400.
  await page.getByLabel('Model').fill('tiny chat');
  await page.getByLabel('Model').press('Enter');
  const shown = await until('the refusal, or the page gone', async () =>
    loads.length > 0
      ? `reloaded ${loads.join(', ')}`
      : (await page.getByRole('alert').filter({ hasText: 'model is not valid' }).count()) > 0
        ? 'refusal'
        : undefined,
  );
  await screenshot(page, 'tenant-filter-refused');
  assert.equal(shown, 'refusal');
});

it('a tenant search the api refuses says why instead of keeping the last result', async () => {
  const { page } = browser;
  const { id } = await createTask(api.base);
  // Taken off the ready queue, as a worker would: the next test's task is the next one there.
  assert.equal(await nextQueued(stack.redis), id);
  await signedIn();
  await page.getByRole('link', { name: 'tenant-a' }).waitFor();
  // Tenant ids hold no space: the api answers 400.
  await page.getByLabel('Find tenant').fill('tenant a');
  await page.getByRole('alert').filter({ hasText: 'q is not valid' }).waitFor({ timeout: 10_000 });
  assert.equal(await page.getByRole('link', { name: 'tenant-a' }).count(), 0);
  await page.getByLabel('Find tenant').fill('tenant-a');
  await page.getByRole('link', { name: 'tenant-a' }).waitFor();
  await screenshot(page, 'tenant-search');
});

it('renders markup in task data, error codes and the address as text, under a script policy of its own', async () => {
  const { page } = browser;
  const markup = (tag: string) => `<${tag} src=x onerror="window.__xss='${tag}'">`;
  const { id } = await createTask(api.base);
  assert.equal(await nextQueued(stack.redis), id);
  const store = stack.worker;
  const { attempt } = await store.claim(id, 'test-worker', 60_000);
  await store.start(id, attempt);
  await store.progress(id, attempt, markup('img'));
  await store.append(id, attempt, [1], [delta(markup('svg'))]);
  await store.finish(id, attempt, {
    status: 'failed',
    error: { code: '<b>code</b>', message: markup('iframe') },
  } as never);
  await signedIn();
  await page.getByText('<b>code</b> 1').first().waitFor();
  await page.goto(`${balancer.base}/console#/tenants/tenant-a`);
  await page.getByRole('link', { name: id }).waitFor();
  await page.goto(`${balancer.base}/console#/tasks/${id}`);
  await page.locator('#task-status', { hasText: 'failed' }).waitFor();
  await page.locator('#task-output', { hasText: markup('svg') }).waitFor();
  await page.getByText(markup('img')).first().waitFor();
  assert.equal(await page.locator('#view img, #view svg:not([role=img]), #view iframe, #view b').count(), 0);
  await page.goto(`${balancer.base}/console#/tasks/${encodeURIComponent(markup('img'))}`);
  await page.getByRole('alert').filter({ hasText: 'No task' }).waitFor();
  assert.equal(await page.locator('#view img').count(), 0);
  await screenshot(page, 'markup-as-text');
  assert.equal(await page.evaluate(() => (window as unknown as { __xss?: string }).__xss), undefined);
  // The policy the page runs under: its own files only, never framed.
  const res = await fetch(`${balancer.base}/console`);
  const csp = res.headers.get('content-security-policy') ?? '';
  // base-uri and form-action do not fall back to default-src: each is named.
  for (const directive of [
    "default-src 'self'",
    "script-src 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'none'",
  ])
    assert.ok(csp.includes(directive), `${directive} in ${csp}`);
  assert.ok(!/unsafe-inline|unsafe-eval/.test(csp), csp);
  assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
});

it('works under its own policy: signs in, shows the overview and a task, and submits no form', async () => {
  const strict = await openBrowser({ enforceCsp: true });
  try {
    const { page } = strict;
    const violations: string[] = [];
    page.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) violations.push(m.text());
    });
    const { id } = await createTask(api.base);
    await signIn(page, balancer.base, ADMIN_KEY);
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page.getByRole('link', { name: 'tenant-a' }).waitFor();
    await page.getByLabel('Open task').fill(id);
    await page.getByLabel('Open task').press('Enter');
    await page.locator('#task-status', { hasText: 'queued' }).waitFor();
    assert.equal(new URL(page.url()).search, '', 'no form was submitted');
    assert.deepEqual(violations, []);
  } finally {
    await strict.close();
  }
});
