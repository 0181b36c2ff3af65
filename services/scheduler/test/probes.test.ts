/**
 * Health and build of every service: scheduler and worker serve /healthz and /readyz on their
 * metrics port (the chart's probes), and each service reports its version and build in
 * `taskline_build_info` and in /healthz.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { freePort, ROOT, SERVICE_NODE, startServices, type Service, type Stack } from '@taskline/testing';

const REVISION = 'abc1234';
/** The Node.js version the services run on (SERVICE_NODE), which each reports. */
const SERVICE_NODE_VERSION = execFileSync(SERVICE_NODE, ['-p', 'process.versions.node'], {
  encoding: 'utf8',
}).trim();
let stack: Stack;
before(async () => {
  stack = await startServices({
    workers: 1,
    apis: 1,
    env: { TASKLINE_BUILD_REVISION: REVISION },
    workerEnv: { TASKLINE_WORKER_MODELS: 'instant' },
    apiEnv: { TASKLINE_MODELS: 'instant' },
  });
});
after(() => stack.stop());

const metricsBase = (s: Service) => `http://127.0.0.1:${String(s.readyLine!.metrics_port)}`;
const version = (service: string) =>
  (JSON.parse(readFileSync(`${ROOT}services/${service}/package.json`, 'utf8')) as { version: string })
    .version;

async function until(what: string, ok: () => Promise<boolean>): Promise<void> {
  for (const end = Date.now() + 15_000; !(await ok()); await new Promise((r) => setTimeout(r, 100)))
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
}

test('scheduler and worker answer /healthz with their version and build, /readyz once ready', async () => {
  for (const [service, s] of [
    ['scheduler', stack.schedulers[0]!],
    ['gpu-worker', stack.workers[0]!],
  ] as const) {
    const health = await fetch(`${metricsBase(s)}/healthz`);
    assert.equal(health.status, 200, service);
    // TASKLINE_HTTP_KEEPALIVE_MS: a probe or scrape that reuses its connection finds it open.
    assert.equal(health.headers.get('keep-alive'), 'timeout=65', service);
    assert.deepEqual(await health.json(), {
      status: 'ok',
      service,
      version: version(service),
      revision: REVISION,
      node: SERVICE_NODE_VERSION,
    });
    await until(`${service} ready`, async () => (await fetch(`${metricsBase(s)}/readyz`)).status === 200);
    assert.equal((await fetch(`${metricsBase(s)}/healthz`, { method: 'POST' })).status, 405);
  }
});

test('every service reports taskline_build_info on /metrics; the api answers /healthz with it too', async () => {
  const api = stack.apis[0]!;
  for (const [service, s] of [
    ['scheduler', stack.schedulers[0]!],
    ['gpu-worker', stack.workers[0]!],
    ['api', api],
  ] as const) {
    const text = await (await fetch(`${metricsBase(s)}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith('taskline_build_info{'));
    assert.ok(line, `${service}: no taskline_build_info`);
    for (const label of [`version="${version(service)}"`, `revision="${REVISION}"`, `service="${service}"`])
      assert.ok(line.includes(label), `${service}: ${line}`);
    assert.ok(line.endsWith(' 1'), line);
  }
  const health = (await (await fetch(`${api.base}/healthz`)).json()) as Record<string, string>;
  assert.deepEqual([health.service, health.version, health.revision], ['api', version('api'), REVISION]);
});

test('a worker no scheduler has registered is alive but not ready', async () => {
  // No scheduler listens there: the worker runs, but no slot of it counts.
  const worker = stack.worker(
    { TASKLINE_SCHEDULER_ADDR: `127.0.0.1:${await freePort()}` },
    { name: 'lonely' },
  );
  await worker.up;
  assert.equal((await fetch(`${metricsBase(worker)}/healthz`)).status, 200);
  const ready = await fetch(`${metricsBase(worker)}/readyz`);
  assert.equal(ready.status, 503);
  assert.deepEqual(await ready.json(), {
    error: { code: 'not_ready', message: 'not registered with a scheduler' },
  });
});
