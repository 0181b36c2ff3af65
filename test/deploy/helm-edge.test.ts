/**
 * The chart's edge and lifecycle: the Ingress and HTTPRoute with their SSE settings, the api
 * Service's type, the `helm test` hook, probes on /healthz and /readyz, the control plane's
 * generated credential (used for real by a control server and client), and Chart.yaml metadata.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse } from 'yaml';
import { loadEnv } from '@taskline/config';
import { connectControl, controlSecurityFromEnv, startControlServer } from '@taskline/control';
import { CHART, render, type Manifest } from './helm-tool.js';
import { schemaProblems } from './k8s-schema.js';
import { env, find, pod, type Container } from './manifests.js';

const EDGE = {
  'ingress.enabled': 'true',
  'ingress.className': 'nginx',
  'ingress.hosts[0]': 'tasks.example.com',
  'ingress.tls[0].secretName': 'tasks-tls',
  'ingress.tls[0].hosts[0]': 'tasks.example.com',
  'httpRoute.enabled': 'true',
  'httpRoute.parentRefs[0].name': 'public',
  'httpRoute.parentRefs[0].namespace': 'gateways',
  'httpRoute.hostnames[0]': 'tasks.example.com',
  'api.service.type': 'LoadBalancer',
  'api.service.annotations.service\\.beta\\.kubernetes\\.io/aws-load-balancer-type': 'nlb',
};

test('the Ingress, HTTPRoute and test hook render and validate against their schemas, unknown fields refused', async () => {
  const ms = render({ set: EDGE });
  const kinds = ms.map((m) => m.kind);
  for (const kind of ['Ingress', 'HTTPRoute', 'Pod']) assert.ok(kinds.includes(kind), kind);
  assert.deepEqual(await schemaProblems(ms), []);
  // The check is real for the new kinds too: a misplaced field is named.
  const route = structuredClone(find(ms, 'HTTPRoute', 'taskline-api'));
  (route.spec as Record<string, unknown>).hostname = 'typo.example.com';
  const problems = await schemaProblems([route]);
  assert.ok(
    problems.some((p) => p.startsWith('HTTPRoute taskline-api') && p.includes('hostname')),
    problems.join('\n'),
  );
});

test('neither the Ingress nor the HTTPRoute renders by default; an HTTPRoute without a Gateway fails', () => {
  const kinds = render().map((m) => m.kind);
  assert.ok(
    !kinds.includes('Ingress') && !kinds.includes('HTTPRoute'),
    "!kinds.includes('Ingress') && !kinds.includes('HTTPRoute')",
  );
  assert.throws(
    () => render({ set: { 'httpRoute.enabled': 'true' } }),
    /httpRoute\.parentRefs must name the Gateway/,
  );
});

test('SSE through the Ingress and the HTTPRoute: no buffering, long or no timeouts', () => {
  const ms = render({ set: EDGE });
  const ingress = find<Manifest & { spec: { rules: { host: string }[]; ingressClassName: string } }>(
    ms,
    'Ingress',
    'taskline-api',
  );
  assert.deepEqual(ingress.metadata, {
    ...ingress.metadata,
    annotations: {
      'nginx.ingress.kubernetes.io/proxy-buffering': 'off',
      'nginx.ingress.kubernetes.io/proxy-read-timeout': '3600',
      'nginx.ingress.kubernetes.io/proxy-send-timeout': '3600',
    },
  });
  assert.equal(ingress.spec.rules[0]!.host, 'tasks.example.com');
  const route = find<Manifest & { spec: { rules: { timeouts: Record<string, string> }[] } }>(
    ms,
    'HTTPRoute',
    'taskline-api',
  );
  assert.deepEqual(route.spec.rules[0]!.timeouts, { request: '0s', backendRequest: '0s' });
  // The timeout is a value; the user's annotations win over the chart's SSE defaults.
  const own = render({
    set: {
      ...EDGE,
      'ingress.streamTimeoutSeconds': '7200',
      'ingress.annotations.nginx\\.ingress\\.kubernetes\\.io/proxy-buffering': 'on',
    },
  });
  const annotations = find(own, 'Ingress', 'taskline-api').metadata.annotations ?? {};
  assert.equal(annotations['nginx.ingress.kubernetes.io/proxy-read-timeout'], '7200');
  assert.equal(annotations['nginx.ingress.kubernetes.io/proxy-buffering'], 'on');
});

test('the api Service takes its type and annotations; metrics never ride a Service reachable from outside', () => {
  const ms = render({ set: EDGE });
  const svc = find<Manifest & { spec: { type: string; ports: { name: string }[] } }>(
    ms,
    'Service',
    'taskline-api',
  );
  assert.equal(svc.spec.type, 'LoadBalancer');
  assert.deepEqual(
    svc.spec.ports.map((p) => p.name),
    ['http'],
  );
  assert.ok(
    Object.keys(svc.metadata.annotations ?? {}).some((k) => k.includes('aws-load-balancer-type')),
    "Object.keys(svc.metadata.annotations ?? {}).some((k) => k.includes('aws-load-balancer-type'))",
  );
  const metrics = find<Manifest & { spec: { type?: string } }>(ms, 'Service', 'taskline-api-metrics');
  assert.equal(metrics.spec.type, undefined, 'ClusterIP');
  const plain = find<Manifest & { spec: { type: string } }>(render(), 'Service', 'taskline-api');
  assert.equal(plain.spec.type, 'ClusterIP');
});

test('the helm test hook runs the flow script with a tenant key, and is a test hook only', () => {
  const ms = render({ set: { 'secrets.apiKeys': 'tenant-a:key-aaaaaaaa' } });
  const hook = find<Manifest & { spec: { containers: Container[]; restartPolicy: string } }>(
    ms,
    'Pod',
    'taskline-test-flow',
  );
  assert.equal(hook.metadata.annotations?.['helm.sh/hook'], 'test');
  assert.equal(hook.spec.restartPolicy, 'Never');
  const c = hook.spec.containers[0]!;
  assert.deepEqual(c.args, ['/test/flow.mjs']);
  assert.equal(env(c, 'TASKLINE_URL')?.value, 'http://taskline-api');
  assert.deepEqual(env(c, 'TASKLINE_API_KEYS')?.valueFrom?.secretKeyRef, {
    name: 'taskline',
    key: 'TASKLINE_API_KEYS',
    optional: true,
  });
  const script = find<{ data: Record<string, string> }>(ms, 'ConfigMap', 'taskline-test-flow').data[
    'flow.mjs'
  ];
  assert.equal(script, readFileSync(`${CHART}/files/helm-test-flow.mjs`, 'utf8'));
  for (const step of ['/lmsp/v1/tasks', '/events', '/cancel']) assert.ok(script!.includes(step), step);
  assert.ok(
    !render({ set: { 'tests.enabled': 'false' } }).some((m) => m.metadata.name === 'taskline-test-flow'),
    "!render({ set: { 'tests.enabled': 'false' } }).some((m) => m.metadata.name === 'taskline-test-flow')",
  );
});

test('scheduler and worker are probed on /healthz and /readyz, not /metrics', () => {
  const ms = render();
  for (const name of ['taskline-scheduler', 'taskline-gpu-worker']) {
    const c = pod(ms, 'Deployment', name).containers[0]!;
    assert.deepEqual(c.readinessProbe?.httpGet, { path: '/readyz', port: 'metrics' }, name);
    assert.deepEqual(c.livenessProbe?.httpGet, { path: '/healthz', port: 'metrics' }, name);
  }
});

/** The settings a container gets from its env: values, the Secret's keys, files under `dir`. */
function containerEnv(c: Container, secret: Record<string, string>, dir: string): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const e of c.env ?? []) {
    if (!e.name.startsWith('TASKLINE_CONTROL_')) continue;
    const ref = e.valueFrom?.secretKeyRef;
    out[e.name] = ref ? secret[ref.key] : e.value!.replace('/etc/taskline/control-tls', dir);
  }
  return out;
}

test("the chart's generated control-plane credential works: TLS to the scheduler's name and the token", async (t) => {
  const ms = render();
  const data = find<{ data: Record<string, string> }>(ms, 'Secret', 'taskline-control').data;
  const secret = Object.fromEntries(
    Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]),
  );
  assert.ok(secret.token!.length >= 32, 'secret.token!.length >= 32');
  const cert = new X509Certificate(secret['tls.crt']!);
  assert.ok(cert.verify(new X509Certificate(secret['ca.crt']!).publicKey), 'signed by the CA');
  assert.equal(cert.checkHost('taskline-scheduler'), 'taskline-scheduler');

  const dir = mkdtempSync(join(tmpdir(), 'taskline-control-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  for (const file of ['ca.crt', 'tls.crt', 'tls.key']) writeFileSync(join(dir, file), secret[file]!);
  const side = (name: string) =>
    loadEnv(containerEnv(pod(ms, 'Deployment', name).containers[0]!, secret, dir));
  const server = await startControlServer({
    address: '127.0.0.1:0',
    schedulerId: 's',
    security: controlSecurityFromEnv(side('taskline-scheduler'), 'scheduler'),
    heartbeatMs: 50,
    workerTimeoutMs: 1000,
    leadership: { isLeader: () => true, leaderAddr: async () => null },
  });
  t.after(() => server.close());
  const worker = connectControl({
    addresses: [`127.0.0.1:${server.port}`],
    workerId: 'w',
    security: controlSecurityFromEnv(side('taskline-gpu-worker'), 'worker'),
    onRefused: (message) => assert.fail(message),
    slots: () => [{ model: 'm', slots: 1, free: 1 }],
    draining: () => false,
    onDrain: () => undefined,
  });
  t.after(() => worker.close());
  for (const end = Date.now() + 10_000; server.workers().length === 0; await sleep(50))
    if (Date.now() > end) assert.fail('the worker never registered over the chart-configured channel');
});

test('controlPlane.tls.enabled false says plaintext out loud; existing Secrets are used, none made', () => {
  const plain = render({ set: { 'controlPlane.tls.enabled': 'false' } });
  for (const name of ['taskline-scheduler', 'taskline-gpu-worker']) {
    const c = pod(plain, 'Deployment', name).containers[0]!;
    assert.equal(env(c, 'TASKLINE_CONTROL_PLAINTEXT')?.value, 'true', name);
  }
  const theirs = render({
    set: { 'controlPlane.existingTokenSecret': 'my-token', 'controlPlane.tls.existingSecret': 'my-tls' },
  });
  assert.ok(
    !theirs.some((m) => m.kind === 'Secret' && m.metadata.name === 'taskline-control'),
    "!theirs.some((m) => m.kind === 'Secret' && m.metadata.name === 'taskline-control')",
  );
  const worker = pod(theirs, 'Deployment', 'taskline-gpu-worker');
  assert.equal(
    env(worker.containers[0]!, 'TASKLINE_CONTROL_TOKEN')?.valueFrom?.secretKeyRef?.name,
    'my-token',
  );
  assert.ok(
    JSON.stringify(worker.volumes).includes('"secretName":"my-tls"'),
    'JSON.stringify(worker.volumes).includes(\'"secretName":"my-tls"\')',
  );
});

test('Chart.yaml carries the metadata a chart registry reads', () => {
  const chart = parse(readFileSync(`${CHART}/Chart.yaml`, 'utf8')) as Record<string, unknown>;
  for (const key of [
    'apiVersion',
    'name',
    'description',
    'version',
    'appVersion',
    'kubeVersion',
    'keywords',
    'maintainers',
  ])
    assert.ok(chart[key], key);
  const annotations = chart.annotations as Record<string, string>;
  const images = parse(annotations['artifacthub.io/images']!) as { image: string }[];
  assert.deepEqual(
    images.map((i) => i.image.split(':')[1]),
    [chart.appVersion, chart.appVersion, chart.appVersion],
  );
});
