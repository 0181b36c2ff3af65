import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { Ajv } from 'ajv';
import { parse, parseAllDocuments } from 'yaml';
import { mergeValues, renderChart, type Values } from './helm-render.js';
import { ROOT } from './promql.js';

const CHART = `${ROOT}helm/taskline`;
const defaults = parse(readFileSync(`${CHART}/values.yaml`, 'utf8')) as Values;
const schema = JSON.parse(readFileSync(`${CHART}/values.schema.json`, 'utf8')) as object;
const validateValues = new Ajv({ allErrors: true, strict: false }).compile(schema);
const examples = readdirSync(`${CHART}/examples`).filter((f) => f.endsWith('.yaml'));

function withExample(file: string): Values {
  return mergeValues(defaults, parse(readFileSync(`${CHART}/examples/${file}`, 'utf8'))) as Values;
}

interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  spec?: Record<string, unknown>;
  [key: string]: unknown;
}

function render(values: Values): Manifest[] {
  return Object.values(renderChart(CHART, values)).flatMap((text) =>
    parseAllDocuments(text)
      .map((d) => {
        assert.deepEqual(d.errors, [], 'rendered YAML parses');
        return d.toJS() as Manifest | null;
      })
      .filter((d): d is Manifest => d !== null),
  );
}

/** The model class for a manifest, from the Kubernetes OpenAPI (kubernetes-models) or the CRD schemas. */
async function modelFor(m: Manifest): Promise<new (data: unknown) => { validate(): void }> {
  const [group, version] = m.apiVersion.includes('/') ? m.apiVersion.split('/') : ['', m.apiVersion];
  const module =
    group === 'keda.sh'
      ? `@kubernetes-models/keda/keda.sh/${version}`
      : group === 'monitoring.coreos.com'
        ? `@kubernetes-models/prometheus-operator/monitoring.coreos.com/${version}`
        : `kubernetes-models/${group ? `${group}/` : ''}${version}`;
  const models = (await import(module)) as Record<string, new (data: unknown) => { validate(): void }>;
  const model = models[m.kind];
  assert.ok(model, `no schema for ${m.apiVersion} ${m.kind}`);
  return model;
}

async function validateAll(manifests: Manifest[]): Promise<void> {
  for (const m of manifests) {
    const Model = await modelFor(m);
    assert.doesNotThrow(() => new Model(m).validate(), `${m.kind} ${m.metadata.name} fails its schema`);
  }
}

const find = (ms: Manifest[], kind: string, name: string) =>
  ms.find((m) => m.kind === kind && m.metadata.name === name);

test('values.yaml and every example validate against values.schema.json', () => {
  assert.ok(validateValues(defaults), JSON.stringify(validateValues.errors));
  assert.ok(examples.length >= 2);
  for (const file of examples)
    assert.ok(validateValues(withExample(file)), `${file}: ${JSON.stringify(validateValues.errors)}`);
});

test('values.schema.json rejects unknown keys, bad enums and Redis without a URL', () => {
  const bad: Values[] = [
    mergeValues(defaults, { api: { replicass: 2 } }) as Values,
    mergeValues(defaults, { image: { pullPolicy: 'Sometimes' } }) as Values,
    mergeValues(defaults, { redis: { bundled: { enabled: false } } }) as Values,
    mergeValues(defaults, { secrets: { create: false } }) as Values,
    mergeValues(defaults, { config: { NOT_OURS: 'x' } }) as Values,
    mergeValues(defaults, { gpuWorker: { gpusPerPod: 0 } }) as Values,
  ];
  for (const values of bad) assert.equal(validateValues(values), false, JSON.stringify(values).slice(0, 80));
});

test('the default render validates against the Kubernetes and CRD schemas', async () => {
  const ms = render(defaults);
  await validateAll(ms);
  const kinds = ms.map((m) => m.kind).sort();
  for (const kind of [
    'Deployment',
    'HorizontalPodAutoscaler',
    'PodDisruptionBudget',
    'ScaledObject',
    'ServiceMonitor',
    'PrometheusRule',
    'NetworkPolicy',
    'Secret',
    'StatefulSet',
  ]) {
    assert.ok(kinds.includes(kind), `missing ${kind}`);
  }
});

for (const file of examples) {
  test(`the render of examples/${file} validates against the Kubernetes and CRD schemas`, async () => {
    await validateAll(render(withExample(file)));
  });
}

test('gpu-worker pods land on the GPU pool, request GPUs and get time to drain', () => {
  const worker = find(render(defaults), 'Deployment', 'taskline-gpu-worker') as {
    spec: {
      replicas?: number;
      template: {
        spec: Record<string, unknown> & { containers: { resources: { limits: Record<string, unknown> } }[] };
      };
    };
  };
  const pod = worker.spec.template.spec;
  assert.deepEqual(pod.nodeSelector, { 'nvidia.com/gpu.present': 'true' });
  assert.deepEqual(pod.tolerations, [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }]);
  assert.equal(pod.containers[0]!.resources.limits['nvidia.com/gpu'], 1);
  assert.ok((pod.terminationGracePeriodSeconds as number) >= 120);
  // The drain deadline follows from the grace period: 15 s left for the on_restart writes and the exit.
  const env = (pod.containers[0] as unknown as { env: { name: string; value: string }[] }).env;
  const drain = env.find((e) => e.name === 'TASKLINE_DRAIN_DEADLINE_MS')?.value;
  assert.equal(Number(drain), (pod.terminationGracePeriodSeconds as number) * 1000 - 15_000);
  assert.equal(worker.spec.replicas, undefined, 'KEDA owns the replica count');
});

test('KEDA scales workers on queue depth, optionally to zero, and is absent when disabled', () => {
  const so = find(
    render(withExample('external-redis-scale-to-zero.yaml')),
    'ScaledObject',
    'taskline-gpu-worker',
  ) as {
    spec: { minReplicaCount: number; triggers: { type: string; metadata: { query: string } }[] };
  };
  assert.equal(so.spec.minReplicaCount, 0);
  assert.match(so.spec.triggers[0]!.metadata.query, /taskline_queue_depth/);
  const fixed = render(withExample('small-no-operators.yaml'));
  assert.equal(find(fixed, 'ScaledObject', 'taskline-gpu-worker'), undefined);
  assert.equal(fixed.filter((m) => m.apiVersion.startsWith('monitoring.coreos.com')).length, 0);
  assert.equal((find(fixed, 'Deployment', 'taskline-gpu-worker')?.spec as { replicas: number }).replicas, 2);
});

test('bundled Redis runs AOF on a persistent volume; external Redis comes from the Secret', () => {
  const ms = render(defaults);
  const redis = find(ms, 'StatefulSet', 'taskline-redis') as {
    spec: { template: { spec: { containers: { args: string[] }[] } }; volumeClaimTemplates: unknown[] };
  };
  assert.deepEqual(redis.spec.template.spec.containers[0]!.args.slice(0, 2), ['--appendonly', 'yes']);
  assert.equal(redis.spec.volumeClaimTemplates.length, 1);
  assert.equal(
    (find(ms, 'ConfigMap', 'taskline-taskline') as { data: Record<string, string> }).data.REDIS_URL,
    'redis://taskline-redis:6379',
  );
  const external = render(
    mergeValues(defaults, { redis: { url: 'redis://r:6379', bundled: { enabled: false } } }) as Values,
  );
  assert.equal(find(external, 'StatefulSet', 'taskline-redis'), undefined);
  assert.equal(
    (find(external, 'Secret', 'taskline-taskline') as { stringData: Record<string, string> }).stringData
      .REDIS_URL,
    'redis://r:6379',
  );
  assert.equal(
    (find(external, 'ConfigMap', 'taskline-taskline') as { data: Record<string, string> }).data.REDIS_URL,
    undefined,
  );
});

test('the PrometheusRule ships exactly the SLO rules tested by promtool', () => {
  const chartCopy = readFileSync(`${CHART}/files/slo-rules.yaml`, 'utf8');
  assert.equal(
    chartCopy,
    readFileSync(`${ROOT}deploy/prometheus/slo-rules.yaml`, 'utf8'),
    'run: cp deploy/prometheus/slo-rules.yaml helm/taskline/files/',
  );
  const rule = find(render(defaults), 'PrometheusRule', 'taskline-taskline-slos') as { spec: unknown };
  assert.deepEqual(rule.spec, parse(chartCopy));
});

test('api and scheduler have disruption budgets; the api autoscales; schedulers spread across nodes', () => {
  const ms = render(defaults);
  for (const name of ['taskline-api', 'taskline-scheduler', 'taskline-gpu-worker'])
    assert.ok(find(ms, 'PodDisruptionBudget', name), name);
  assert.ok(find(ms, 'HorizontalPodAutoscaler', 'taskline-api'));
  assert.equal((find(ms, 'Deployment', 'taskline-scheduler')?.spec as { replicas: number }).replicas, 2);
});

test('the Kubernetes schema check rejects malformed manifests', async () => {
  const ms = render(defaults);
  const api = structuredClone(find(ms, 'Deployment', 'taskline-api')!);
  (api.spec as Record<string, unknown>).replicas = 'two';
  await assert.rejects(validateAll([api]));
  const so = structuredClone(find(ms, 'ScaledObject', 'taskline-gpu-worker')!);
  delete (so.spec as Record<string, unknown>).scaleTargetRef;
  await assert.rejects(validateAll([so]));
});
