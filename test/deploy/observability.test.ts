import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { SLO_THRESHOLDS } from '@taskline/metrics';
import { knownSeries, loadRules, metricNames, ROOT } from './promql.js';

test('metricNames finds selected series and ignores functions, labels and grouping', () => {
  assert.deepEqual(
    metricNames(
      'histogram_quantile(0.9, sum by (le, model) (rate(a_bucket{le="2.5",x=~"y"}[5m]))) / on(slo) b:c:d and up',
    ),
    ['a_bucket', 'b:c:d', 'up'],
  );
});

test('SLO rules reference only metrics defined in @taskline/metrics', async () => {
  const known = await knownSeries();
  const rules = loadRules();
  assert.ok(rules.length > 40, 'rules.length > 40');
  for (const rule of rules) {
    for (const name of metricNames(rule.expr))
      assert.ok(known.has(name), `${rule.record ?? rule.alert} uses unknown ${name}`);
  }
});

test('SLO latency rules use the thresholds that @taskline/metrics declares', () => {
  const exprs = loadRules()
    .map((r) => r.expr)
    .join('\n');
  assert.ok(
    exprs.includes(
      `taskline_task_time_to_first_token_seconds_bucket{le="${SLO_THRESHOLDS.timeToFirstTokenSeconds}"}`,
    ),
    'exprs.includes(`taskline_task_time_to_first_token_seconds_bucket{le="${SLO_THRESHOLDS.timeToFirstTokenSeconds}"}`)',
  );
  assert.ok(
    exprs.includes(`taskline_task_queue_wait_seconds_bucket{le="${SLO_THRESHOLDS.queueWaitSeconds}"}`),
    'exprs.includes(`taskline_task_queue_wait_seconds_bucket{le="${SLO_THRESHOLDS.queueWaitSeconds}"}`)',
  );
  assert.ok(
    exprs.includes(`taskline_event_delivery_seconds_bucket{le="${SLO_THRESHOLDS.eventDeliverySeconds}"}`),
    'exprs.includes(`taskline_event_delivery_seconds_bucket{le="${SLO_THRESHOLDS.eventDeliverySeconds}"}`)',
  );
});

test('every SLO has page and ticket alerts over two windows each', () => {
  const alerts = loadRules().filter((r) => r.alert?.endsWith('BudgetBurn'));
  for (const slo of ['task_acceptance', 'time_to_first_token', 'queue_wait', 'event_delivery']) {
    const mine = alerts.filter((a) => a.labels?.slo === slo);
    assert.deepEqual(
      mine.map((a) => a.labels?.severity).sort(),
      ['critical', 'critical', 'warning', 'warning'],
      slo,
    );
    for (const a of mine) assert.equal((a.expr.match(/taskline:slo_errors:ratio_rate/g) ?? []).length, 2);
  }
});

interface Panel {
  title: string;
  targets?: { expr: string }[];
  panels?: Panel[];
}

test('Grafana dashboards parse, have unique ids and query only known metrics', async () => {
  const known = await knownSeries();
  const dir = `${ROOT}deploy/grafana/dashboards/`;
  const files = readdirSync(dir).filter((f) => f.endsWith('.json'));
  assert.deepEqual(files.sort(), ['queues.json', 'slos.json', 'tenants.json', 'workers.json']);
  const uids = new Set<string>();
  for (const file of files) {
    const dash = JSON.parse(readFileSync(dir + file, 'utf8')) as {
      uid: string;
      title: string;
      panels: Panel[];
    };
    assert.ok(!uids.has(dash.uid), `duplicate uid ${dash.uid}`);
    uids.add(dash.uid);
    const panels = dash.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
    assert.ok(panels.length >= 4, `${file} has too few panels`);
    for (const panel of panels) {
      assert.ok(panel.targets && panel.targets.length > 0, `${file}: ${panel.title} has no query`);
      for (const { expr } of panel.targets) {
        const names = metricNames(expr);
        assert.ok(names.length > 0, `${file}: ${panel.title} selects nothing`);
        for (const name of names) assert.ok(known.has(name), `${file}: ${panel.title} uses unknown ${name}`);
      }
    }
  }
});

test('the compose Prometheus scrapes every service under the job names the alerts expect', () => {
  const config = parse(readFileSync(`${ROOT}deploy/prometheus/prometheus.yml`, 'utf8')) as {
    scrape_configs: { job_name: string; static_configs: { targets: string[] }[] }[];
  };
  const compose = parse(readFileSync(`${ROOT}deploy/compose.yaml`, 'utf8')) as {
    services: Record<string, { environment?: Record<string, string> }>;
  };
  // Every service is scraped on its metrics port, the api never on its client port.
  for (const c of config.scrape_configs) {
    const service = c.job_name.replace(/^taskline-/, '');
    const port = compose.services[service]?.environment?.TASKLINE_METRICS_PORT;
    assert.ok(port, `${service} sets TASKLINE_METRICS_PORT in compose`);
    assert.deepEqual(c.static_configs[0]!.targets, [`${service}:${port}`]);
  }
  assert.deepEqual(config.scrape_configs.map((c) => c.job_name).sort(), [
    'taskline-api',
    'taskline-gpu-worker',
    'taskline-scheduler',
  ]);
});

test('dashboards filter every query by namespace, and by model and tenant where the series has them', () => {
  const dir = `${ROOT}deploy/grafana/dashboards/`;
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.json'))) {
    const dash = JSON.parse(readFileSync(dir + file, 'utf8')) as {
      templating: { list: { name: string; includeAll?: boolean }[] };
      panels: Panel[];
    };
    for (const v of ['namespace', 'model', 'tenant'])
      assert.ok(
        dash.templating.list.some((x) => x.name === v && x.includeAll),
        `${file} lacks $${v}`,
      );
    for (const { expr } of dash.panels
      .flatMap((p) => [p, ...(p.panels ?? [])])
      .flatMap((p) => p.targets ?? [])) {
      for (const m of expr.matchAll(
        /(taskline_[a-z_]+|taskline:slo_errors:[a-z0-9_]+|process_[a-z_]+)(\{[^}]*\})?/g,
      ))
        assert.match(m[2] ?? '', /namespace=~"\$namespace"/, `${file}: ${m[0]} is not filtered by namespace`);
      if (/taskline_(queue_depth|worker_slots)\b/.test(expr))
        assert.match(expr, /model=~"\$model"/, `${file}: ${expr}`);
      if (/taskline_task_creates_total/.test(expr))
        assert.match(expr, /tenant=~"\$tenant"/, `${file}: ${expr}`);
    }
  }
});
