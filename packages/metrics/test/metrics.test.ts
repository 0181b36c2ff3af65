import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  createMetrics,
  httpMetrics,
  metricsHandler,
  OTHER_TENANT,
  SLO_THRESHOLDS,
  startMetricsServer,
  TenantLabels,
  UNMATCHED_ROUTE,
} from '../src/index.js';

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;

/** The value of the sample `name` whose labels include `labels`, in any order; undefined if absent. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...m[2]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[3]);
  }
  return undefined;
}

test('every metric follows Prometheus naming conventions', async () => {
  const metrics = createMetrics({ service: 'api', tenantTopN: 3, defaultMetrics: false });
  const all = await metrics.registry.getMetricsAsJSON();
  assert.ok(all.length >= 18, `expected every metric to be registered, got ${all.length}`);
  for (const m of all) {
    // prom-client types `type` as a numeric enum; the JSON it returns carries the name ('counter').
    const type = String(m.type);
    assert.match(m.name, NAME);
    assert.ok(m.name.startsWith('taskline_'), `${m.name} lacks the taskline_ prefix`);
    assert.ok(m.help.length > 10, `${m.name} needs help text`);
    if (type === 'counter') assert.ok(m.name.endsWith('_total'), `counter ${m.name} must end in _total`);
    else assert.ok(!m.name.endsWith('_total'), `${type} ${m.name} must not end in _total`);
    assert.ok(!/_(ms|milliseconds|minutes)(_|$)/.test(m.name), `${m.name} must use base units`);
  }
  metrics.close();
});

test('SLO thresholds are bucket boundaries of their histograms', async () => {
  const metrics = createMetrics({ service: 'api', tenantTopN: 3, defaultMetrics: false });
  metrics.timeToFirstTokenSeconds.observe({ model: 'm' }, 0.1);
  metrics.queueWaitSeconds.observe({ kind: 'k', model: 'm' }, 0.1);
  metrics.eventDeliverySeconds.observe({ protocol: 'lmsp' }, 0.1);
  const text = await metrics.registry.metrics();
  assert.match(
    text,
    new RegExp(
      `taskline_task_time_to_first_token_seconds_bucket\\{le="${SLO_THRESHOLDS.timeToFirstTokenSeconds}"`,
    ),
  );
  assert.match(
    text,
    new RegExp(`taskline_task_queue_wait_seconds_bucket\\{le="${SLO_THRESHOLDS.queueWaitSeconds}"`),
  );
  assert.match(
    text,
    new RegExp(`taskline_event_delivery_seconds_bucket\\{le="${SLO_THRESHOLDS.eventDeliverySeconds}"`),
  );
  metrics.close();
});

test('the service label is on every series and process metrics are collected by default', async () => {
  const metrics = createMetrics({ service: 'scheduler', tenantTopN: 3, tenantRebalanceMs: 0 });
  metrics.leasesExpiredTotal.inc();
  const text = await metrics.registry.metrics();
  assert.equal(sample(text, 'taskline_leases_expired_total', { service: 'scheduler' }), 1);
  assert.match(text, /^process_cpu_user_seconds_total\{service="scheduler"\}/m);
});

test('TenantLabels gives at most topN tenants their own label and aggregates the rest', () => {
  const labels = new TenantLabels(2, 4);
  assert.equal(labels.label('a'), 'a');
  assert.equal(labels.label('b'), 'b');
  assert.equal(labels.label('c'), OTHER_TENANT);
  assert.equal(labels.label(''), OTHER_TENANT);
  assert.deepEqual(labels.current().sort(), ['a', 'b']);
});

test('TenantLabels.rebalance promotes the most active tenants and reports the demoted', () => {
  const labels = new TenantLabels(2, 8);
  labels.label('a');
  labels.label('b');
  for (let i = 0; i < 10; i++) labels.label('heavy');
  labels.label('a');
  assert.equal(labels.label('heavy', 0), OTHER_TENANT);
  assert.deepEqual(labels.rebalance(), ['b']);
  assert.equal(labels.label('heavy'), 'heavy');
  assert.equal(labels.label('b'), OTHER_TENANT);
});

test('TenantLabels keeps bounded memory under a flood of distinct tenants', () => {
  // Space-saving keeps any tenant with more than total/capacity of the activity: 50 of 150 here.
  const labels = new TenantLabels(1, 8);
  for (let i = 0; i < 50; i++) labels.label('big');
  for (let i = 0; i < 100; i++) labels.label(`t${i}`);
  labels.rebalance();
  assert.deepEqual(labels.current(), ['big']);
  assert.throws(() => new TenantLabels(-1), RangeError);
});

test('setQueueDepth sums tenants outside the top N into other and drops empty tenants', async () => {
  const metrics = createMetrics({ service: 'scheduler', tenantTopN: 1, defaultMetrics: false });
  metrics.setQueueDepth('tiny-chat', [
    ['acme', 5],
    ['beta', 2],
    ['gamma', 3],
  ]);
  let text = await metrics.registry.metrics();
  assert.equal(sample(text, 'taskline_queue_depth', { model: 'tiny-chat', tenant: 'acme' }), 5);
  assert.equal(sample(text, 'taskline_queue_depth', { model: 'tiny-chat', tenant: OTHER_TENANT }), 5);
  assert.doesNotMatch(text, /tenant="beta"/);
  metrics.setQueueDepth('tiny-chat', [['acme', 1]]);
  text = await metrics.registry.metrics();
  assert.doesNotMatch(text, /tenant="other"/);
  metrics.close();
});

test('setQueueWait shows the oldest wait per tenant, the longest of the rest under other', async () => {
  const metrics = createMetrics({ service: 'scheduler', tenantTopN: 1, defaultMetrics: false });
  metrics.setQueueDepth('tiny-chat', [['acme', 5]]);
  metrics.setQueueWait('tiny-chat', [
    ['acme', 12],
    ['beta', 2],
    ['gamma', 30],
  ]);
  let text = await metrics.registry.metrics();
  const name = 'taskline_queue_oldest_wait_seconds';
  assert.equal(sample(text, name, { model: 'tiny-chat', tenant: 'acme' }), 12);
  assert.equal(sample(text, name, { model: 'tiny-chat', tenant: OTHER_TENANT }), 30);
  assert.doesNotMatch(text, /tenant="gamma"/);
  metrics.setQueueWait('tiny-chat', []);
  text = await metrics.registry.metrics();
  assert.equal(sample(text, name, { model: 'tiny-chat', tenant: 'acme' }), undefined);
  metrics.close();
});

test('transitioned counts by kind and state and times ended tasks from their creation', async () => {
  const metrics = createMetrics({ service: 'gpu-worker', tenantTopN: 1, defaultMetrics: false });
  const createdAt = Date.now() - 2000;
  metrics.transitioned({ kind: 'response', state: 'running', terminal: false, createdAt });
  metrics.transitioned({ kind: 'response', state: 'succeeded', terminal: true, createdAt });
  const text = await metrics.registry.metrics();
  const transitions = 'taskline_task_transitions_total';
  assert.equal(sample(text, transitions, { kind: 'response', state: 'running' }), 1);
  assert.equal(sample(text, transitions, { kind: 'response', state: 'succeeded' }), 1);
  const duration = 'taskline_task_duration_seconds_count';
  assert.equal(sample(text, duration, { kind: 'response', state: 'succeeded' }), 1);
  assert.equal(sample(text, duration, { kind: 'response', state: 'running' }), undefined);
  assert.equal(sample(text, 'taskline_task_duration_seconds_bucket', { state: 'succeeded', le: '1' }), 0);
  metrics.close();
});

test('rebalanceTenants deletes the series of demoted tenants', async () => {
  const metrics = createMetrics({
    service: 'api',
    tenantTopN: 1,
    defaultMetrics: false,
    tenantRebalanceMs: 0,
  });
  metrics.taskCreatesTotal.inc({ protocol: 'lmsp', tenant: metrics.tenant('first'), outcome: 'accepted' });
  for (let i = 0; i < 5; i++) {
    metrics.taskCreatesTotal.inc({ protocol: 'lmsp', tenant: metrics.tenant('busy'), outcome: 'accepted' });
  }
  assert.deepEqual(await metrics.rebalanceTenants(), ['first']);
  const text = await metrics.registry.metrics();
  assert.doesNotMatch(text, /tenant="first"/);
  assert.equal(sample(text, 'taskline_task_creates_total', { tenant: OTHER_TENANT, outcome: 'accepted' }), 5);
  assert.equal(metrics.tenant('busy'), 'busy');
});

async function listen(server: ReturnType<typeof createServer>): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

test('httpMetrics counts by route pattern and skips timing event streams; metricsHandler serves them', async () => {
  const metrics = createMetrics({ service: 'api', tenantTopN: 1, defaultMetrics: false });
  const middleware = httpMetrics(metrics);
  const serve = metricsHandler(metrics.registry);
  const server = createServer((req, res) => {
    middleware(req, res, () => {
      if (req.url === '/metrics') return serve(req, res);
      if (req.url?.startsWith('/v1/responses/')) {
        Object.assign(req, { baseUrl: '/v1', route: { path: '/responses/:id' } });
        res.setHeader('content-type', req.url.endsWith('/events') ? 'text/event-stream' : 'application/json');
        return res.end('{}');
      }
      res.statusCode = 404;
      res.end();
    });
  });
  const base = await listen(server);
  try {
    await (await fetch(`${base}/v1/responses/abc`)).text();
    await (await fetch(`${base}/v1/responses/def`)).text();
    await (await fetch(`${base}/v1/responses/def/events`)).text();
    await (await fetch(`${base}/wp-admin`)).text();
    const res = await fetch(`${base}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    const ok = { route: '/v1/responses/:id', method: 'GET', status: '200', service: 'api' };
    assert.equal(sample(text, 'taskline_http_requests_total', ok), 3);
    assert.equal(
      sample(text, 'taskline_http_request_duration_seconds_count', ok),
      2,
      'the event stream is not timed',
    );
    assert.equal(sample(text, 'taskline_http_requests_total', { route: UNMATCHED_ROUTE, status: '404' }), 1);
    assert.doesNotMatch(text, /wp-admin|abc|def/);
  } finally {
    server.close();
    metrics.close();
  }
});

test('startMetricsServer keeps an idle scrape connection open as long as it is told, and says so', async () => {
  // Node.js's own 5 s: a scraper (or a test) reusing its connection as the server closes it fails.
  const metrics = createMetrics({ service: 'scheduler', tenantTopN: 1, defaultMetrics: false });
  const server = await startMetricsServer({ metrics, port: 0, host: '127.0.0.1', keepAliveMs: 65_000 });
  try {
    const res = await fetch(`http://127.0.0.1:${server.port}/metrics`);
    await res.text();
    assert.equal(res.headers.get('keep-alive'), 'timeout=65');
  } finally {
    await server.close();
    metrics.close();
  }
});

test('startMetricsServer exposes /metrics and answers other paths with a JSON error', async () => {
  const metrics = createMetrics({ service: 'gpu-worker', tenantTopN: 1, defaultMetrics: false });
  metrics.workerSlots.set({ model: 'tiny-chat', state: 'free' }, 4);
  const server = await startMetricsServer({ metrics, port: 0, host: '127.0.0.1' });
  try {
    const base = `http://127.0.0.1:${server.port}`;
    const text = await (await fetch(`${base}/metrics`)).text();
    assert.equal(
      sample(text, 'taskline_worker_slots', { model: 'tiny-chat', state: 'free', service: 'gpu-worker' }),
      4,
    );
    const missing = await fetch(`${base}/nope`);
    assert.equal(missing.status, 404);
    assert.deepEqual(await missing.json(), { error: { code: 'not_found' } });
    const post = await fetch(`${base}/metrics`, { method: 'POST' });
    assert.equal(post.status, 405);
    await post.text();
  } finally {
    await server.close();
    metrics.close();
  }
});

test("log lines dropped for a lagging stdout are the logger's own count, read at each scrape", async () => {
  let dropped = 0;
  const metrics = createMetrics({
    service: 'api',
    tenantTopN: 1,
    defaultMetrics: false,
    logLinesDropped: () => dropped,
  });
  const scrape = async () =>
    sample(await metrics.registry.metrics(), 'taskline_log_lines_dropped_total', { service: 'api' });
  assert.equal(await scrape(), 0);
  dropped = 7;
  assert.equal(await scrape(), 7);
  dropped = 12;
  assert.equal(await scrape(), 12);
  metrics.close();
});

/** What Prometheus sends when it stores exemplars: OpenMetrics first, the text format after. */
const PROMETHEUS_ACCEPT =
  'application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2';

test('/metrics serves the Prometheus text by default and OpenMetrics, with trace exemplars, when Accept prefers it', async () => {
  const trace = { trace_id: 'a'.repeat(32), span_id: 'b'.repeat(16) };
  let active: Record<string, string> | undefined = trace;
  const metrics = createMetrics({
    service: 'gpu-worker',
    tenantTopN: 1,
    defaultMetrics: false,
    exemplars: () => active,
  });
  metrics.queueWaitSeconds.observe({ kind: 'response', model: 'm' }, 0.3);
  active = undefined;
  metrics.modelLoadSeconds.observe({ model: 'm' }, 2);
  metrics.leasesExpiredTotal.inc();
  const server = await startMetricsServer({ metrics, port: 0, host: '127.0.0.1' });
  const scrape = async (accept?: string) => {
    const res = await fetch(`http://127.0.0.1:${server.port}/metrics`, {
      headers: accept ? { accept } : {},
    });
    return { type: res.headers.get('content-type') ?? '', text: await res.text() };
  };
  const lines = (text: string, prefix: string) => text.split('\n').filter((l) => l.startsWith(prefix));
  try {
    const om = await scrape(PROMETHEUS_ACCEPT);
    assert.match(om.type, /^application\/openmetrics-text; version=1\.0\.0/);
    assert.ok(om.text.endsWith('# EOF\n'), "om.text.endsWith('# EOF\\n')");
    const [bucket] = lines(om.text, 'taskline_task_queue_wait_seconds_bucket{').filter((l) =>
      l.includes('le="0.5"'),
    );
    assert.match(bucket!, / 1 # \{trace_id="a{32}",span_id="b{16}"\} 0\.3 \d+(\.\d+)?$/);
    // An observation made outside any trace keeps no exemplar.
    for (const line of lines(om.text, 'taskline_model_load_seconds_bucket{'))
      assert.doesNotMatch(line, / # /);
    // OpenMetrics names a counter's family without `_total`, its sample with it.
    assert.match(om.text, /^# TYPE taskline_leases_expired counter$/m);
    assert.equal(sample(om.text, 'taskline_leases_expired_total', { service: 'gpu-worker' }), 1);
    for (const accept of [
      undefined,
      '*/*',
      'text/plain;version=0.0.4',
      'application/openmetrics-text;q=0.2, text/plain',
    ]) {
      const plain = await scrape(accept);
      assert.match(plain.type, /^text\/plain; version=0\.0\.4/, String(accept));
      assert.doesNotMatch(plain.text, / # \{/, 'no exemplars in the Prometheus format');
      assert.doesNotMatch(plain.text, /# EOF/);
      // The OpenMetrics scrape before left the counters' names as they were.
      assert.equal(sample(plain.text, 'taskline_leases_expired_total', { service: 'gpu-worker' }), 1);
      assert.match(plain.text, /^# TYPE taskline_leases_expired_total counter$/m);
      assert.equal(
        sample(plain.text, 'taskline_task_queue_wait_seconds_bucket', { le: '0.5', model: 'm' }),
        1,
      );
    }
  } finally {
    await server.close();
    metrics.close();
  }
});

test('without an exemplar source the histograms are plain, and OpenMetrics is still served', async () => {
  const metrics = createMetrics({ service: 'api', tenantTopN: 1, defaultMetrics: false });
  metrics.httpRequestDurationSeconds.observe({ route: '/x', method: 'GET', status: '200' }, 0.01);
  const server = await startMetricsServer({ metrics, port: 0, host: '127.0.0.1' });
  try {
    const res = await fetch(`http://127.0.0.1:${server.port}/metrics`, {
      headers: { accept: 'application/openmetrics-text' },
    });
    assert.match(res.headers.get('content-type') ?? '', /^application\/openmetrics-text/);
    const text = await res.text();
    assert.equal(sample(text, 'taskline_http_request_duration_seconds_count', { route: '/x' }), 1);
    assert.doesNotMatch(text, / # \{/);
  } finally {
    await server.close();
    metrics.close();
  }
});
