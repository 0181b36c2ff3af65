import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { createMetrics, startMetricsServer } from '@taskline/metrics';
import { freePort, until } from '@taskline/testing';
import { burnRates } from '../src/slo.js';

const RULES = fileURLToPath(new URL('../../../deploy/prometheus/slo-rules.yaml', import.meta.url));

test('without TASKLINE_PROMETHEUS_URL the burn rates are "not configured"', async () => {
  assert.deepEqual(await burnRates(''), { configured: false });
});

test('an unreachable Prometheus is reported, not thrown', async () => {
  const port = await freePort();
  const got = await burnRates(`http://127.0.0.1:${port}`);
  assert.equal(got.configured, true);
  assert.match(got.error ?? '', /Prometheus unreachable/);
});

test('burn rates come from a real Prometheus evaluating the SLO rules over real metrics, per namespace', async () => {
  // The api's own metric, failing 1 create in 11: a burn rate of about 91 against a 99.9% objective.
  const metrics = createMetrics({ service: 'api', tenantTopN: 5, defaultMetrics: false });
  const server = await startMetricsServer({ metrics, port: 0, host: '127.0.0.1' });
  const load = setInterval(() => {
    metrics.taskCreatesTotal.inc({ protocol: 'lmsp', tenant: 'acme', outcome: 'accepted' }, 10);
    metrics.taskCreatesTotal.inc({ protocol: 'lmsp', tenant: 'acme', outcome: 'error' }, 1);
  }, 100);
  const dir = mkdtempSync(join(tmpdir(), 'taskline-prometheus-'));
  const port = await freePort();
  writeFileSync(
    join(dir, 'prometheus.yml'),
    [
      'global: { scrape_interval: 1s, evaluation_interval: 1s }',
      `rule_files: [${JSON.stringify(RULES)}]`,
      // Two releases (namespaces) scrape the same api: their ratios must not collide.
      'scrape_configs:',
      ...['team-a', 'team-b'].map(
        (ns) =>
          `  - { job_name: ${ns}, static_configs: [{ targets: ["127.0.0.1:${server.port}"], labels: { namespace: ${ns} } }] }`,
      ),
    ].join('\n'),
  );
  const prometheus = spawn(
    'prometheus',
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    { stdio: 'ignore' },
  );
  try {
    const got = await until('burn rates from Prometheus', async () => {
      const r = await burnRates(`http://127.0.0.1:${port}`);
      const acceptance = r.slos?.filter((s) => s.slo === 'task_acceptance' && s.window === '5m') ?? [];
      return acceptance.length === 2 && acceptance.every((a) => Number.isFinite(a.burn_rate))
        ? acceptance
        : undefined;
    });
    assert.deepEqual(got.map((a) => a.namespace).sort(), ['team-a', 'team-b']);
    for (const { burn_rate: rate } of got) assert.ok(rate > 50 && rate < 150, `burn rate ${rate}`);
  } finally {
    clearInterval(load);
    prometheus.kill('SIGKILL');
    await server.close();
    metrics.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
