/**
 * /metrics under a real Prometheus (with exemplar storage, as docs/tracing.md says to run it): it
 * negotiates OpenMetrics, scrapes it without an error, stores the latency histograms' trace
 * exemplars, and names every series as the Prometheus text format does (rules and dashboards hold).
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import {
  createMetrics,
  startMetricsServer,
  type MetricsServer,
  type TasklineMetrics,
} from '@taskline/metrics';
import { exited, freePort, until } from '@taskline/testing';

const TRACE = { trace_id: '4bf92f3577b34da6a3ce929d0e0e4736', span_id: '00f067aa0ba902b7' };

let dir: string;
let metrics: TasklineMetrics;
let server: MetricsServer;
let prometheus: ChildProcess;
let api: string;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'taskline-openmetrics-'));
  metrics = createMetrics({ service: 'gpu-worker', tenantTopN: 2, exemplars: () => TRACE });
  metrics.queueWaitSeconds.observe({ kind: 'response', model: 'tiny-chat' }, 0.3);
  metrics.leasesExpiredTotal.inc();
  server = await startMetricsServer({ metrics, port: 0, host: '127.0.0.1' });
  const config = join(dir, 'prometheus.yml');
  await writeFile(
    config,
    [
      'global: { scrape_interval: 1s }',
      'scrape_configs:',
      '  - job_name: worker',
      `    static_configs: [{ targets: ['127.0.0.1:${server.port}'] }]`,
      '',
    ].join('\n'),
  );
  const port = await freePort();
  api = `http://127.0.0.1:${port}`;
  prometheus = spawn(
    'prometheus',
    [
      `--config.file=${config}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--enable-feature=exemplar-storage',
    ],
    { stdio: 'ignore' },
  );
});

after(async () => {
  prometheus?.kill('SIGTERM');
  if (prometheus) await exited(prometheus);
  await server?.close();
  metrics?.close();
  await rm(dir, { recursive: true, force: true });
});

async function query<T>(path: string): Promise<T | undefined> {
  const res = await fetch(`${api}${path}`).catch(() => undefined);
  if (!res?.ok) return undefined;
  return ((await res.json()) as { data: T }).data;
}

test('Prometheus scrapes /metrics as OpenMetrics, keeps the trace exemplars and the same series names', async () => {
  const target = await until('the worker target to be scraped', async () => {
    const data = await query<{ activeTargets: { health: string; lastError: string }[] }>('/api/v1/targets');
    const t = data?.activeTargets[0];
    return t && t.health !== 'unknown' ? t : undefined;
  });
  assert.deepEqual([target.health, target.lastError], ['up', '']);
  const exemplars = await until('the exemplar to be stored', async () => {
    const q = encodeURIComponent('taskline_task_queue_wait_seconds_bucket');
    const data = await query<{ exemplars: { labels: Record<string, string> }[] }[]>(
      `/api/v1/query_exemplars?query=${q}&start=0&end=${Math.ceil(Date.now() / 1000) + 60}`,
    );
    return data?.length ? data : undefined;
  });
  assert.deepEqual(exemplars[0]!.exemplars[0]!.labels, TRACE);
  const stored = (await query<string[]>('/api/v1/label/__name__/values'))!.filter(
    (n) => n !== 'up' && !n.startsWith('scrape_'),
  );
  const plain = await (await fetch(`http://127.0.0.1:${server.port}/metrics`)).text();
  const named = new Set(
    plain
      .split('\n')
      .filter((l) => l && !l.startsWith('#'))
      .map((l) => /^[^{ ]+/.exec(l)![0]),
  );
  assert.deepEqual(stored.sort(), [...named].sort());
  assert.ok(stored.includes('taskline_leases_expired_total'), 'a counter keeps its _total');
});
