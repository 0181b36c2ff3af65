import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { CHART, CRDS, helm, render } from './helm-tool.js';
import { schemaProblems } from './k8s-schema.js';
import { readmeWithTable } from './chart-readme.js';
import { ROOT } from './promql.js';
import { configMap, env, find, pod, WORKLOADS, type Workload } from './manifests.js';

// The chart rendered by real Helm (helm-tool.ts). Examples render on a cluster with the KEDA and
// prometheus-operator CRDs, except no-crds.yaml, which renders with none.
const examples = readdirSync(`${CHART}/examples`).filter((f) => f.endsWith('.yaml'));
const example = (file: string) => `${CHART}/examples/${file}`;
const renderExample = (file: string) =>
  render({ files: [example(file)], apiVersions: file === 'no-crds.yaml' ? [] : CRDS });

test('helm lint --strict passes for the defaults and every example', () => {
  helm(['lint', '--strict', CHART]);
  for (const file of examples) helm(['lint', '--strict', CHART, '-f', example(file)]);
});

test('the chart ships the four deployment shapes as examples', () => {
  for (const file of [
    'gpu-pool-cuda.yaml',
    'external-managed-redis.yaml',
    'no-crds.yaml',
    'kube-prometheus-stack.yaml',
  ])
    assert.ok(examples.includes(file), file);
});

test('values.schema.json refuses unknown keys, bad enums, Redis without a URL and chart-derived settings', () => {
  const bad: Record<string, string>[] = [
    { 'api.replicass': '2' },
    { 'image.pullPolicy': 'Sometimes' },
    { 'redis.bundled.enabled': 'false' },
    { 'secrets.create': 'false' },
    { 'config.NOT_OURS': 'x' },
    { 'config.TASKLINE_MODELS': 'other' },
    { 'config.TASKLINE_DRAIN_DEADLINE_MS': '1' },
    { 'redis.durability': 'never' },
  ];
  for (const set of bad)
    assert.throws(() => render({ set }), /values don't meet the specifications|schema/, JSON.stringify(set));
});

test('every render validates against the Kubernetes 1.35 and CRD schemas, unknown fields refused', async () => {
  const all = [render(), ...examples.map(renderExample)].flat();
  assert.deepEqual(await schemaProblems(all), []);
  const kinds = new Set(render().map((m) => m.kind));
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
    'ServiceAccount',
  ])
    assert.ok(kinds.has(kind), `missing ${kind}`);
});

test('the schema check refuses wrong types, missing fields and unknown fields', async () => {
  const ms = render();
  const api = structuredClone(find<Workload>(ms, 'Deployment', 'taskline-api'));
  (api.spec as Record<string, unknown>).replicas = 'two';
  const so = structuredClone(find(ms, 'ScaledObject', 'taskline-gpu-worker'));
  delete (so.spec as Record<string, unknown>).scaleTargetRef;
  const typo = structuredClone(find<Workload>(ms, 'Deployment', 'taskline-scheduler'));
  (typo.spec.template.spec.containers[0] as unknown as Record<string, unknown>).imagePulPolicy = 'Always';
  const sm = structuredClone(find(ms, 'ServiceMonitor', 'taskline'));
  (sm.spec as Record<string, unknown>).endpoint = [];
  // One check for all four (a TypeScript program per check is the slow part); each must be named.
  const problems = await schemaProblems([api, so, typo, sm]);
  for (const m of [api, so, typo, sm])
    assert.ok(
      problems.some((p) => p.startsWith(`${m.kind} ${m.metadata.name}:`)),
      `${m.kind} ${m.metadata.name} passes: ${problems.join('; ')}`,
    );
});

// Defect 1: the default GPU install serves a model on the GPU it requests.
test("default workers run CUDA on the GPU they request, with the image's model and the api's model list", () => {
  const ms = render();
  const spec = pod(ms, 'Deployment', 'taskline-gpu-worker');
  const worker = spec.containers[0]!;
  assert.equal(worker.resources?.limits?.['nvidia.com/gpu'], 1);
  assert.equal(env(worker, 'TASKLINE_EXECUTION_PROVIDER')?.value, 'cuda');
  assert.equal(env(worker, 'TASKLINE_MODELS_DIR')?.value, '/models');
  assert.ok(
    !worker.volumeMounts?.some((v) => v.mountPath === '/models'),
    "nothing hides the image's /models",
  );
  assert.equal(spec.nodeSelector, undefined, 'no label that only GPU Feature Discovery sets');
  const cm = configMap(ms);
  assert.equal(cm.TASKLINE_WORKER_MODELS, cm.TASKLINE_MODELS);
  const cpu = pod(render({ set: { 'gpuWorker.gpusPerPod': '0' } }), 'Deployment', 'taskline-gpu-worker')
    .containers[0]!;
  assert.equal(env(cpu, 'TASKLINE_EXECUTION_PROVIDER')?.value, 'cpu');
  const image = render({
    set: {
      'gpuWorker.image.repository': 'registry.example.com/w',
      'gpuWorker.image.digest': `sha256:${'a'.repeat(64)}`,
    },
  });
  assert.equal(
    pod(image, 'Deployment', 'taskline-gpu-worker').containers[0]!.image,
    `registry.example.com/w:0.1.0@sha256:${'a'.repeat(64)}`,
  );
  assert.equal(pod(image, 'Deployment', 'taskline-api').containers[0]!.image, 'ghcr.io/taskline/api:0.1.0');
});

test('the GPU pool example loads its models through an init container into /models and runs CUDA', () => {
  const spec = pod(renderExample('gpu-pool-cuda.yaml'), 'Deployment', 'taskline-gpu-worker');
  const worker = spec.containers[0]!;
  assert.equal(env(worker, 'TASKLINE_EXECUTION_PROVIDER')?.value, 'cuda');
  assert.equal(worker.resources?.requests?.['nvidia.com/gpu'], 1);
  assert.equal(spec.runtimeClassName, 'nvidia');
  const init = spec.initContainers?.[0];
  assert.ok(init, 'an init container');
  assert.ok(init.image.includes('models'), "init.image.includes('models')");
  const volume = spec.volumes?.find((v) => v.name === 'models');
  assert.ok(volume?.emptyDir, 'models volume');
  assert.deepEqual(init.volumeMounts, [{ name: 'models', mountPath: '/target' }]);
  assert.ok(
    worker.volumeMounts?.some((v) => v.name === 'models' && v.mountPath === '/models'),
    "worker.volumeMounts?.some((v) => v.name === 'models' && v.mountPath === '/models')",
  );
  const claim = pod(
    render({ set: { 'gpuWorker.models.claimName': 'models' } }),
    'Deployment',
    'taskline-gpu-worker',
  );
  assert.deepEqual(claim.volumes?.find((v) => v.name === 'models')?.persistentVolumeClaim, {
    claimName: 'models',
    readOnly: true,
  });
});

// Defect 2: no CRD objects where the CRDs are missing; the labels kube-prometheus-stack selects on.
test('CRD objects render only where their CRDs exist, with the labels Prometheus selects on', () => {
  const none = renderExample('no-crds.yaml');
  assert.deepEqual(
    none.filter(
      (m) => m.apiVersion.startsWith('keda.sh') || m.apiVersion.startsWith('monitoring.coreos.com'),
    ),
    [],
  );
  assert.equal(
    find<Workload>(none, 'Deployment', 'taskline-gpu-worker').spec.replicas,
    2,
    'without KEDA the count is fixed',
  );
  const kps = renderExample('kube-prometheus-stack.yaml');
  for (const [kind, name] of [
    ['ServiceMonitor', 'taskline'],
    ['PrometheusRule', 'taskline-slos'],
  ] as const)
    assert.equal(find(kps, kind, name).metadata.labels?.release, 'kube-prometheus-stack');
  const dash = kps.filter((m) => m.kind === 'ConfigMap' && m.metadata.labels?.grafana_dashboard === '1');
  assert.equal(dash.length, 4);
  assert.ok(
    dash.every((m) => m.metadata.namespace === 'monitoring'),
    "dash.every((m) => m.metadata.namespace === 'monitoring')",
  );
});

// Defect 3: external Redis reaches every pod, whether or not the chart makes the keys' Secret.
test('external Redis: REDIS_URL comes from a Secret in every pod, with secrets.create false too', () => {
  for (const [file, secret] of [
    ['external-redis-scale-to-zero.yaml', 'taskline-redis'],
    ['external-managed-redis.yaml', 'taskline-redis'],
  ] as const) {
    const ms = renderExample(file);
    assert.equal(
      ms.find((m) => m.kind === 'StatefulSet'),
      undefined,
    );
    for (const [kind, name] of WORKLOADS) {
      const ref = env(pod(ms, kind, name).containers[0]!, 'REDIS_URL')?.valueFrom?.secretKeyRef;
      assert.deepEqual(ref, { name: secret, key: 'url' }, `${file}: ${name}`);
      assert.equal(env(pod(ms, kind, name).containers[0]!, 'TASKLINE_DURABILITY')?.value, 'always');
    }
  }
  const made = find<{ stringData: Record<string, string> }>(
    renderExample('external-redis-scale-to-zero.yaml'),
    'Secret',
    'taskline-redis',
  );
  assert.equal(made.stringData.url, 'rediss://taskline-redis.example.internal:6380');
  assert.equal(
    renderExample('external-managed-redis.yaml').find((m) => m.kind === 'Secret'),
    undefined,
    'existing Secrets only',
  );
});

// Defect 4: MCP answers the Service's names and the public ones.
test('the api allows MCP Host names of its Service and of the public endpoint', () => {
  const api = pod(renderExample('external-managed-redis.yaml'), 'Deployment', 'taskline-api').containers[0]!;
  const hosts = env(api, 'TASKLINE_MCP_ALLOWED_HOSTS')?.value?.split(',') ?? [];
  for (const h of [
    'taskline-api',
    'taskline-api.taskline.svc',
    'taskline-api.taskline.svc.cluster.local',
    'taskline.example.com',
  ])
    assert.ok(hosts.includes(h), h);
});

// Defect 5 (the query's behaviour is tested by promtool in keda.test.ts).
test('the KEDA query is scoped to the namespace, counts the leader only and survives empty sides', () => {
  const so = find<{ spec: { triggers: { metadata: { query: string } }[]; minReplicaCount: number } }>(
    render({ namespace: 'team-a', files: [example('external-redis-scale-to-zero.yaml')] }),
    'ScaledObject',
    'taskline-gpu-worker',
  );
  const q = so.spec.triggers[0]!.metadata.query;
  assert.equal(so.spec.minReplicaCount, 0);
  assert.equal((q.match(/or vector\(0\)/g) ?? []).length, 2);
  assert.equal((q.match(/namespace="team-a"/g) ?? []).length, 3);
  assert.match(q, /taskline_scheduler_leader/);
});

test('the chart ships NOTES.txt, the SLO rules and the dashboards exactly as tested', () => {
  assert.match(readFileSync(`${CHART}/templates/NOTES.txt`, 'utf8'), /\S/);
  const rules = readFileSync(`${CHART}/files/slo-rules.yaml`, 'utf8');
  assert.equal(
    rules,
    readFileSync(`${ROOT}deploy/prometheus/slo-rules.yaml`, 'utf8'),
    'run: cp deploy/prometheus/slo-rules.yaml helm/taskline/files/',
  );
  assert.deepEqual(find<{ spec: unknown }>(render(), 'PrometheusRule', 'taskline-slos').spec, parse(rules));
  const dir = `${ROOT}deploy/grafana/dashboards/`;
  for (const file of readdirSync(dir))
    assert.equal(
      readFileSync(`${CHART}/files/dashboards/${file}`, 'utf8'),
      readFileSync(dir + file, 'utf8'),
      `cp ${dir}${file} helm/taskline/files/dashboards/`,
    );
});

test('the chart README documents every value of values.schema.json', () => {
  const readme = readFileSync(`${CHART}/README.md`, 'utf8');
  assert.equal(readme, readmeWithTable(readme), 'run: node --import tsx test/deploy/chart-readme.ts --write');

  for (const key of Object.keys(parse(readFileSync(`${CHART}/values.yaml`, 'utf8')) as object))
    assert.ok(readme.includes(`| \`${key}`), key);
});

/** Variables only the pod spec uses: Kubernetes expands them into others, no service reads them. */
const POD_ONLY = new Set(['POD_IP', 'REDIS_PASSWORD', 'REDISCLI_AUTH']);
/** A tool pool's own (its image's module, its env's version): one value in the shared ConfigMap would be every pool's. */
const POOL_OWN = ['TASKLINE_TOOL_MODULE', 'TASKLINE_TOOL_VERSION'];

/**
 * Settings the chart passes from values of its own, in every Redis shape and with a plaintext
 * control plane: the services' env,
 * the keys' Secret, and the ConfigMap's entries that do not come from `config`.
 */
function chartSettings(): Set<string> {
  const values = parse(readFileSync(`${CHART}/values.yaml`, 'utf8')) as { config: object };
  const names = new Set(Object.keys(configMap(render())).filter((k) => !(k in values.config)));
  // tool-workers.yaml: the settings the chart passes only to tool worker pools.
  const shapes = ['external-managed-redis.yaml', 'redis-cluster-in-chart.yaml', 'tool-workers.yaml'];
  // What the example's pools pass through their own `env` is theirs, not the chart's.
  const pools = parse(readFileSync(`${CHART}/examples/tool-workers.yaml`, 'utf8')) as {
    toolWorkers: { env?: object }[];
  };
  const poolEnv = new Set(pools.toolWorkers.flatMap((p) => Object.keys(p.env ?? {})));
  const plaintext = render({ set: { 'controlPlane.tls.enabled': 'false' } });
  for (const m of [render(), plaintext, ...shapes.map(renderExample)].flat()) {
    if (m.kind === 'Secret' && m.metadata.name === 'taskline')
      for (const k of Object.keys((m as { stringData?: object }).stringData ?? {})) names.add(k);
    if (m.kind !== 'Deployment') continue; // Redis's own pods and Job read none of them
    for (const c of (m as Workload).spec.template.spec.containers)
      for (const e of c.env ?? []) if (!poolEnv.has(e.name)) names.add(e.name);
  }
  for (const name of POD_ONLY) names.delete(name);
  return names;
}

test('every setting the chart passes is one the services read (packages/config defaults)', async () => {
  const { DEFAULTS } = await import('@taskline/config');
  const names = chartSettings();
  for (const name of names) assert.ok(name in DEFAULTS, `${name} is not a setting of packages/config`);
  assert.ok(
    names.has('TASKLINE_DRAIN_DEADLINE_MS') && names.has('TASKLINE_MCP_ALLOWED_HOSTS'),
    "names.has('TASKLINE_DRAIN_DEADLINE_MS') && names.has('TASKLINE_MCP_ALLOWED_HOSTS')",
  );
});

// A name in `config` that the chart also sets is overridden without a word (env wins over
// envFrom, and the keys' Secret, listed after the ConfigMap, wins over it: config.TASKLINE_ADMIN_KEYS
// met the Secret's empty one), and one no service reads (a typo) does nothing. TASKLINE_WORKER_ID
// would name every worker replica alike: they share the ConfigMap.
test('config takes every other setting of packages/config, and refuses those the chart sets and unknown names', async () => {
  const { DEFAULTS } = await import('@taskline/config');
  const own = new Set([...chartSettings(), 'TASKLINE_WORKER_ID', ...POOL_OWN]);
  const open = Object.fromEntries(Object.entries(DEFAULTS).filter(([k]) => !own.has(k)));
  const schema = JSON.parse(readFileSync(`${CHART}/values.schema.json`, 'utf8')) as {
    properties: { config: { propertyNames: { enum?: string[] } } };
  };
  assert.deepEqual(schema.properties.config.propertyNames.enum?.toSorted(), Object.keys(open).toSorted());
  const dir = mkdtempSync(join(tmpdir(), 'taskline-config-'));
  const valuesFile = (name: string, config: Record<string, string>) => {
    writeFileSync(join(dir, name), stringify({ config }));
    return join(dir, name);
  };
  try {
    const all = configMap(render({ files: [valuesFile('open.yaml', open)] }));
    assert.deepEqual(all, { ...configMap(render()), ...open });
    const refused = [...own, 'TASKLINE_RATE_LIMIT_PER_SECOND'];
    const file = valuesFile('refused.yaml', Object.fromEntries(refused.map((k) => [k, '1'])));
    assert.throws(
      () => render({ files: [file] }),
      (err: Error) => refused.every((k) => err.message.includes(`invalid propertyName '${k}'`)),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('operator console keys reach the api through the Secret', () => {
  const ms = render({ set: { 'secrets.adminKeys': 'ops-key' } });
  const secret = find<{ stringData: Record<string, string> }>(ms, 'Secret', 'taskline');
  assert.equal(secret.stringData.TASKLINE_ADMIN_KEYS, 'ops-key');
});

test('JWT auth without an issuer and an audience fails at render, naming both', () => {
  assert.throws(
    () => render({ set: { 'secrets.jwtJwksUrl': 'https://idp.example.com/jwks' } }),
    /secrets\.jwtIssuer and secrets\.jwtAudience are required/,
  );
  const ok = render({
    set: {
      'secrets.jwtJwksUrl': 'https://idp.example.com/jwks',
      'secrets.jwtIssuer': 'https://idp.example.com',
      'secrets.jwtAudience': 'taskline',
    },
  });
  assert.equal(
    find<{ stringData: Record<string, string> }>(ok, 'Secret', 'taskline').stringData.TASKLINE_JWT_AUDIENCE,
    'taskline',
  );
});
