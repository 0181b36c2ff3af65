import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CHART, render, type Manifest } from './helm-tool.js';
import { env, find, pod, WORKLOADS, type Workload } from './manifests.js';

// What the chart's pods run with: probes and deadlines, restarts on change, the bundled Redis,
// metrics, labels and pod-level options (helm.test.ts checks every render against the schemas).

// Defect 6: rollouts.
test('probes, preStop sleep and grace periods follow the shutdown and drain deadlines', () => {
  const ms = render({ set: { 'gpuWorker.drainDeadlineSeconds': '600' } });
  const api = pod(ms, 'Deployment', 'taskline-api');
  assert.deepEqual(api.containers[0]!.readinessProbe?.httpGet, { path: '/readyz', port: 'http' });
  assert.deepEqual(api.containers[0]!.livenessProbe?.httpGet, { path: '/healthz', port: 'http' });
  const sleep = api.containers[0]!.lifecycle?.preStop?.sleep?.seconds ?? 0;
  assert.ok(sleep > 0, 'sleep > 0');
  const shutdown = Number(env(api.containers[0]!, 'TASKLINE_SHUTDOWN_DEADLINE_MS')?.value) / 1000;
  assert.ok(
    api.terminationGracePeriodSeconds! > sleep + shutdown,
    'api.terminationGracePeriodSeconds! > sleep + shutdown',
  );
  for (const name of ['taskline-scheduler', 'taskline-gpu-worker']) {
    const c = pod(ms, 'Deployment', name).containers[0]!;
    assert.ok(c.livenessProbe, `${name} liveness`);
    assert.ok(c.readinessProbe ?? c.startupProbe, `${name} readiness or startup`);
  }
  const worker = pod(ms, 'Deployment', 'taskline-gpu-worker');
  assert.equal(env(worker.containers[0]!, 'TASKLINE_DRAIN_DEADLINE_MS')?.value, '600000');
  assert.ok(worker.terminationGracePeriodSeconds! > 600, 'grace period follows the drain deadline');
});

// Defect 7: operations.
test('pods restart when settings or keys change', () => {
  const pinned = { 'redis.bundled.password': 'p4ss' };
  const a = render({ set: pinned });
  const b = render({ set: { ...pinned, 'secrets.apiKeys': 'acme:rotated' } });
  const c = render({ set: { ...pinned, 'config.TASKLINE_LOG_LEVEL': 'debug' } });
  const again = render({ set: pinned, fresh: true });
  for (const [kind, name] of WORKLOADS) {
    const ann = (ms: Manifest[]) => find<Workload>(ms, kind, name).spec.template.metadata.annotations;
    assert.notEqual(ann(a)['checksum/secrets'], ann(b)['checksum/secrets'], `${name} keys`);
    assert.notEqual(ann(a)['checksum/config'], ann(c)['checksum/config'], `${name} config`);
    assert.equal(ann(a)['checksum/config'], ann(again)['checksum/config'], `${name} same settings`);
  }
});

test('bundled Redis: AOF as durability says, a password, noeviction and room for the rewrite fork', () => {
  const toBytes = (q: string) => {
    const m = /^(\d+)(mb|gb|Mi|Gi)$/.exec(q)!;
    return Number(m[1]) * (m[2]!.startsWith('g') || m[2] === 'Gi' ? 1024 ** 3 : 1024 ** 2);
  };
  for (const durability of ['always', 'everysec']) {
    const ms = render({ set: { 'redis.durability': durability } });
    const redis = pod(ms, 'StatefulSet', 'taskline-redis').containers[0]!;
    const arg = (flag: string) => redis.args![redis.args!.indexOf(flag) + 1];
    assert.equal(arg('--appendonly'), 'yes');
    assert.equal(arg('--appendfsync'), durability);
    assert.equal(arg('--maxmemory-policy'), 'noeviction');
    assert.equal(arg('--requirepass'), '$(REDIS_PASSWORD)');
    assert.ok(
      toBytes(arg('--maxmemory')!) * 2 <= toBytes(String(redis.resources!.limits!.memory)),
      "toBytes(arg('--maxmemory')!) * 2 <= toBytes(String(redis.resources!.limits!.memory))",
    );
    for (const [kind, name] of WORKLOADS) {
      const c = pod(ms, kind, name).containers[0]!;
      assert.equal(env(c, 'TASKLINE_DURABILITY')?.value, durability);
      assert.match(env(c, 'REDIS_URL')?.value ?? '', /^redis:\/\/:\$\(REDIS_PASSWORD\)@taskline-redis:6379$/);
      assert.ok(
        env(c, 'REDIS_PASSWORD')?.valueFrom?.secretKeyRef,
        "env(c, 'REDIS_PASSWORD')?.valueFrom?.secretKeyRef",
      );
    }
  }
  const secret = find<{ stringData: { password: string } }>(render(), 'Secret', 'taskline-redis');
  assert.ok(secret.stringData.password.length >= 32, 'secret.stringData.password.length >= 32');
});

test('metrics are served on their own port, scraped there only, and reachable only by the scraper', () => {
  const ms = render();
  const api = pod(ms, 'Deployment', 'taskline-api').containers[0]!;
  assert.equal(env(api, 'TASKLINE_METRICS_PORT')?.value, '9464');
  assert.ok(
    api.ports?.some((p) => p.name === 'metrics' && p.containerPort === 9464),
    "api.ports?.some((p) => p.name === 'metrics' && p.containerPort === 9464)",
  );
  const sm = find<{ spec: { endpoints: { port: string; honorLabels?: boolean }[] } }>(
    ms,
    'ServiceMonitor',
    'taskline',
  );
  assert.deepEqual(
    sm.spec.endpoints.map((e) => e.port),
    ['metrics'],
  );
  // The services' own `service` label (api, scheduler, gpu-worker) wins over the operator's
  // Service-name label, so rules and dashboards read the same labels as in the compose stack.
  assert.equal(sm.spec.endpoints[0]!.honorLabels, true);
  const policy = find<{
    spec: {
      ingress: {
        from: Record<string, { matchLabels: Record<string, string> }>[];
        ports: { port: number }[];
      }[];
    };
  }>(ms, 'NetworkPolicy', 'taskline-metrics');
  const from = policy.spec.ingress[0]!.from[0]!;
  assert.deepEqual(from.namespaceSelector!.matchLabels, { 'kubernetes.io/metadata.name': 'monitoring' });
  assert.deepEqual(from.podSelector!.matchLabels, { 'app.kubernetes.io/name': 'prometheus' });
  assert.deepEqual(
    policy.spec.ingress[0]!.ports.map((p) => p.port),
    [9464],
  );
  const open = find<{ spec: { ingress: { ports: { port: number }[] }[] } }>(
    ms,
    'NetworkPolicy',
    'taskline-api-ingress',
  );
  assert.deepEqual(
    open.spec.ingress.flatMap((i) => i.ports.map((p) => p.port)),
    [8080],
  );
});

// Defect 8: hygiene.
test('every object carries the standard labels; names follow the fullname helper', () => {
  for (const m of render()) {
    const l = m.metadata.labels ?? {};
    for (const key of [
      'helm.sh/chart',
      'app.kubernetes.io/managed-by',
      'app.kubernetes.io/version',
      'app.kubernetes.io/instance',
      'app.kubernetes.io/name',
    ])
      assert.ok(l[key], `${m.kind} ${m.metadata.name} lacks ${key}`);
  }
  const named = render({ release: 'prod', set: { fullnameOverride: 'tl' } });
  assert.ok(
    named.every((m) => m.metadata.name.startsWith('tl')),
    'fullnameOverride',
  );
  assert.ok(
    render({ release: 'prod' }).every((m) => m.metadata.name.startsWith('prod-taskline')),
    "render({ release: 'prod' }).every((m) => m.metadata.name.startsWith('prod-taskline'))",
  );
});

test('pods take pull secrets, annotations, affinity, spread, priority and runtime classes, and mount no token', () => {
  const ms = render({
    files: [`${CHART}/examples/gpu-pool-cuda.yaml`],
    set: {
      'imagePullSecrets[0].name': 'regcred',
      'podAnnotations.a': 'b',
      'api.priorityClassName': 'high',
      'api.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight': '1',
    },
  });
  for (const [kind, name] of WORKLOADS) {
    const spec = pod(ms, kind, name);
    assert.deepEqual(spec.imagePullSecrets, [{ name: 'regcred' }], name);
    assert.equal(spec.automountServiceAccountToken, false, name);
    assert.equal(spec.serviceAccountName, 'taskline');
    assert.equal(find<Workload>(ms, kind, name).spec.template.metadata.annotations.a, 'b');
  }
  assert.equal(pod(ms, 'Deployment', 'taskline-api').priorityClassName, 'high');
  assert.ok(
    pod(ms, 'Deployment', 'taskline-gpu-worker').topologySpreadConstraints,
    "pod(ms, 'Deployment', 'taskline-gpu-worker').topologySpreadConstraints",
  );
  assert.equal(
    find<{ automountServiceAccountToken: boolean }>(ms, 'ServiceAccount', 'taskline')
      .automountServiceAccountToken,
    false,
  );
});

interface Pdb extends Manifest {
  spec: {
    minAvailable?: number;
    maxUnavailable?: number;
    unhealthyPodEvictionPolicy?: string;
    selector: { matchLabels: Record<string, string> };
  };
}

/**
 * Pods a drain may evict, per component with a PDB, with the component at its fewest replicas
 * (its HPA's or ScaledObject's minimum, else its own count).
 */
function drainable(ms: Manifest[]): Record<string, number> {
  const scaler = (kind: string, name: string) =>
    ms.find((m) => m.kind === kind && (m.spec?.scaleTargetRef as { name: string }).name === name)?.spec;
  const fewest = (name: string) =>
    (scaler('HorizontalPodAutoscaler', name)?.minReplicas ??
      scaler('ScaledObject', name)?.minReplicaCount ??
      ms.find((m) => m.metadata.name === name && /^(Deployment|StatefulSet)$/.test(m.kind))?.spec
        ?.replicas) as number;
  return Object.fromEntries(
    ms
      .filter((m): m is Pdb => m.kind === 'PodDisruptionBudget')
      .map(({ metadata, spec }) => [
        metadata.labels?.['app.kubernetes.io/component'],
        spec.maxUnavailable ?? fewest(metadata.name) - spec.minAvailable!,
      ]),
  );
}

// A PDB whose minAvailable is every pod the component runs lets no pod be evicted: `kubectl
// drain` of that pod's node waits forever (scheduler.replicas: 1, or an api of 1 replica).
test('no PodDisruptionBudget blocks a node drain, whatever the replica counts', () => {
  const renders: [string, Record<string, string>, string[]][] = [
    ['defaults', {}, []],
    ['one scheduler', { 'scheduler.replicas': '1' }, []],
    ['one api, no HPA', { 'api.autoscaling.enabled': 'false', 'api.replicas': '1' }, []],
    ['HPA down to one api', { 'api.autoscaling.minReplicas': '1' }, []],
    ['two of two kept', { 'scheduler.pdb.minAvailable': '2' }, []],
    ['in-chart Redis Cluster', {}, [`${CHART}/examples/redis-cluster-in-chart.yaml`]],
  ];
  for (const [what, set, files] of renders) {
    const ms = render({ set, files });
    for (const [name, allowed] of Object.entries(drainable(ms)))
      assert.ok(allowed >= 1, `${what}: ${name} lets a drain evict ${allowed} pods`);
    // A crash-looping pod is never Ready: under the default IfHealthyBudget it may not be evicted
    // while the budget is short, which it is for as long as the pod crashes.
    for (const pdb of ms.filter((m): m is Pdb => m.kind === 'PodDisruptionBudget'))
      assert.equal(pdb.spec.unhealthyPodEvictionPolicy, 'AlwaysAllow', `${what}: ${pdb.metadata.name}`);
  }
  assert.throws(
    () => render({ set: { 'gpuWorker.pdb.maxUnavailable': '0' } }),
    /values don't meet the specifications|schema/,
  );
  // Where there are pods to spare, the budget is there: one pod at a time.
  assert.deepEqual(drainable(render()), { api: 1, scheduler: 1, 'gpu-worker': 1 });
});

// CPU workers (gpusPerPod: 0) that tolerate the GPU nodes' taint land on GPU nodes, taking room
// (and, in node autoscalers, keeping GPU nodes up) that GPU workers need.
test('workers tolerate the GPU taint only when they request GPUs, or when told to', () => {
  const GPU = { key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' };
  const tolerations = (set: Record<string, string>) =>
    (pod(render({ set }), 'Deployment', 'taskline-gpu-worker').tolerations as unknown[] | undefined) ?? [];
  assert.deepEqual(tolerations({}), [GPU]);
  assert.deepEqual(tolerations({ 'gpuWorker.gpusPerPod': '0' }), [], 'a CPU worker');
  const spot = { key: 'spot', operator: 'Exists', effect: 'NoSchedule' };
  const own = { 'gpuWorker.tolerations[0].key': 'spot', 'gpuWorker.tolerations[0].operator': 'Exists' };
  const withSpot = { ...own, 'gpuWorker.tolerations[0].effect': 'NoSchedule' };
  assert.deepEqual(tolerations(withSpot), [GPU, spot], "the pool's own taints as well");
  assert.deepEqual(tolerations({ ...withSpot, 'gpuWorker.gpusPerPod': '0' }), [spot]);
  const asked = { ...own, 'gpuWorker.tolerations[0].key': 'nvidia.com/gpu', 'gpuWorker.gpusPerPod': '0' };
  assert.deepEqual(tolerations(asked), [{ key: 'nvidia.com/gpu', operator: 'Exists' }], 'asked for');
});

test('every container and init container requests CPU and memory, as a ResourceQuota requires', () => {
  const renders = [
    render(),
    render({ files: [`${CHART}/examples/gpu-pool-cuda.yaml`] }),
    render({ files: [`${CHART}/examples/redis-cluster-in-chart.yaml`] }),
  ];
  for (const m of renders.flat()) {
    const spec = (m as Partial<Workload>).spec?.template?.spec;
    for (const c of [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])]) {
      const { requests } = c.resources ?? {};
      assert.ok(
        requests?.cpu && requests.memory,
        `${m.kind} ${m.metadata.name}: ${c.name} requests cpu and memory`,
      );
    }
  }
});
