// The chart's tool worker pools (toolWorkers): objects per pool, settings, grace period, defaults and refusals.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CHART, render, type Manifest } from './helm-tool.js';
import { env, find, pod, type Workload } from './manifests.js';

const EXAMPLE = `${CHART}/examples/tool-workers.yaml`;
const withPools = (set: Record<string, string> = {}) => render({ files: [EXAMPLE], set });
const POOL_OBJECTS = ['Deployment', 'Service', 'PodDisruptionBudget', 'ScaledObject'];

test('off by default: no tool worker object without a pool', () => {
  const ms = render();
  assert.deepEqual(
    ms.filter((m) => m.metadata.labels?.['app.kubernetes.io/component'] === 'tool-worker'),
    [],
  );
});

test('each pool gets its Deployment, Service, PDB and ScaledObject, selecting only its own pods', () => {
  const ms = withPools();
  for (const pool of ['ci', 'imports']) {
    const name = `taskline-tool-${pool}`;
    for (const kind of POOL_OBJECTS) find(ms, kind, name);
    const selector = find<Workload & { spec: { selector: { matchLabels: Record<string, string> } } }>(
      ms,
      'Deployment',
      name,
    ).spec.selector.matchLabels;
    assert.deepEqual(selector, {
      'app.kubernetes.io/name': 'taskline',
      'app.kubernetes.io/instance': 'taskline',
      'app.kubernetes.io/component': 'tool-worker',
      'taskline.dev/tool-pool': pool,
    });
    const pdb = find<Manifest & { spec: { maxUnavailable: number } }>(ms, 'PodDisruptionBudget', name);
    assert.equal(pdb.spec.maxUnavailable, 1);
  }
});

test('a gateway pool gets its upstreams as TASKLINE_UPSTREAMS, credentials only by variable name', () => {
  const ms = withPools();
  const gateway = pod(ms, 'Deployment', 'taskline-tool-mcp-gateway').containers[0]!;
  const upstreams = JSON.parse(env(gateway, 'TASKLINE_UPSTREAMS')?.value ?? '{}') as {
    upstreams: { name: string; transport: { headers: Record<string, unknown> } }[];
  };
  assert.deepEqual(
    upstreams.upstreams.map((u) => u.name),
    ['everything'],
  );
  assert.deepEqual(upstreams.upstreams[0]!.transport.headers, {
    authorization: { env: 'EVERYTHING_AUTHORIZATION' },
  });
  const envFrom = (gateway as unknown as { envFrom: Record<string, { name: string }>[] }).envFrom;
  assert.ok(
    envFrom.some((e) => e.secretRef?.name === 'mcp-everything-token'),
    "envFrom.some((e) => e.secretRef?.name === 'mcp-everything-token')",
  );
  const ci = pod(ms, 'Deployment', 'taskline-tool-ci').containers[0]!;
  assert.equal(env(ci, 'TASKLINE_UPSTREAMS'), undefined);
});

test('the grace period is the drain deadline plus the margin, and the worker is told the deadline', () => {
  const ms = withPools();
  const ci = pod(ms, 'Deployment', 'taskline-tool-ci');
  assert.equal(env(ci.containers[0]!, 'TASKLINE_DRAIN_DEADLINE_MS')?.value, '600000');
  assert.equal(ci.terminationGracePeriodSeconds, 630);
  const imports = pod(ms, 'Deployment', 'taskline-tool-imports');
  assert.equal(env(imports.containers[0]!, 'TASKLINE_DRAIN_DEADLINE_MS')?.value, '270000');
  assert.equal(imports.terminationGracePeriodSeconds, 300);
});

test('image, tenants, concurrency, env and Secrets reach the pool; the scheduler and Redis too', () => {
  const ms = withPools();
  const ci = pod(ms, 'Deployment', 'taskline-tool-ci').containers[0]!;
  const imports = pod(ms, 'Deployment', 'taskline-tool-imports').containers[0]!;
  assert.equal(ci.image, 'ghcr.io/acme/taskline-ci-tools:1.0.0');
  assert.equal(env(ci, 'CI_RELEASES_DIR')?.value, '/tmp/releases');
  // Public, each tool's own concurrency: neither is set.
  assert.equal(env(ci, 'TASKLINE_TOOL_TENANTS'), undefined);
  assert.equal(env(ci, 'TASKLINE_TOOL_CONCURRENCY'), undefined);
  assert.equal(env(imports, 'TASKLINE_TOOL_TENANTS')?.value, 'acme');
  assert.equal(env(imports, 'TASKLINE_TOOL_CONCURRENCY')?.value, '4');
  const envFrom = (imports as unknown as { envFrom: Record<string, { name: string }>[] }).envFrom;
  assert.ok(
    envFrom.some((e) => e.secretRef?.name === 'warehouse-credentials'),
    "envFrom.some((e) => e.secretRef?.name === 'warehouse-credentials')",
  );
  for (const c of [ci, imports]) {
    assert.equal(env(c, 'TASKLINE_SCHEDULER_ADDR')?.value, 'taskline-scheduler:7070');
    assert.ok(env(c, 'REDIS_URL'), "env(c, 'REDIS_URL')");
    assert.deepEqual(c.ports, [{ name: 'metrics', containerPort: 9464 }]);
    // The image's ENTRYPOINT runs the tool worker unless the pool says otherwise.
    assert.equal((c as { command?: string[] }).command, undefined);
  }
  const multi = render({
    files: [EXAMPLE],
    set: {
      'toolWorkers[0].tenants[0]': 'acme',
      'toolWorkers[0].tenants[1]': 'globex',
      'toolWorkers[0].command[0]': 'node',
      'toolWorkers[0].args[0]': 'custom.js',
    },
  });
  const custom = pod(multi, 'Deployment', 'taskline-tool-ci').containers[0]! as { command?: string[] };
  assert.equal(env(custom as never, 'TASKLINE_TOOL_TENANTS')?.value, 'acme,globex');
  assert.deepEqual(custom.command, ['node']);
  assert.deepEqual((custom as { args?: string[] }).args, ['custom.js']);
});

test("a pool's keys replace the defaults one by one; false and 0 are kept, not taken for unset", () => {
  const ms = withPools({ 'toolWorkers[1].autoscaling.enabled': 'false', 'toolWorkers[1].replicas': '0' });
  const imports = find<Workload>(ms, 'Deployment', 'taskline-tool-imports');
  assert.equal(imports.spec.replicas, 0);
  assert.ok(
    !ms.some((m) => m.kind === 'ScaledObject' && m.metadata.name === 'taskline-tool-imports'),
    "!ms.some((m) => m.kind === 'ScaledObject' && m.metadata.name === 'taskline-tool-imports')",
  );
  const so = find<Manifest & { spec: Record<string, number> }>(ms, 'ScaledObject', 'taskline-tool-ci');
  // maxReplicas from the pool, the rest from toolWorkerDefaults.autoscaling.
  assert.deepEqual([so.spec.minReplicaCount, so.spec.maxReplicaCount, so.spec.cooldownPeriod], [0, 4, 300]);
  // Without KEDA's CRD, a fixed count.
  const noKeda = render({ files: [EXAMPLE], apiVersions: [] });
  assert.equal(find<Workload>(noKeda, 'Deployment', 'taskline-tool-ci').spec.replicas, 1);
  assert.ok(!noKeda.some((m) => m.kind === 'ScaledObject'), "!noKeda.some((m) => m.kind === 'ScaledObject')");
});

test("KEDA scales each pool from zero by default, on its own tools' queues alone", () => {
  type Scaled = Manifest & {
    spec: {
      scaleTargetRef: { name: string };
      minReplicaCount: number;
      triggers: { type: string; metadata: Record<string, string> }[];
    };
  };
  const ms = withPools();
  // Each pool's tool names as regular expressions (`.` quoted).
  const expected = { ci: 'run_ci_pipeline', imports: 'import_dataset|import\\.status' };
  for (const [pool, tools] of Object.entries(expected)) {
    const so = find<Scaled>(ms, 'ScaledObject', `taskline-tool-${pool}`);
    assert.equal(so.spec.scaleTargetRef.name, `taskline-tool-${pool}`);
    const [trigger, ...more] = so.spec.triggers;
    assert.equal(more.length, 0);
    assert.equal(trigger!.type, 'prometheus');
    assert.equal(trigger!.metadata.activationThreshold, '0');
    // Its queues, matched exactly: waiting tasks (the leader's gauge) and busy slots.
    const query = trigger!.metadata.query!;
    const matcher = `model=~\`tool:(${tools})\``;
    for (const metric of ['taskline_queue_depth', 'taskline_worker_slots'])
      assert.ok(query.includes(`${metric}{namespace="taskline", ${matcher}`), query);
    // No other model: each `model` matcher of the query is this pool's.
    assert.equal(query.split('model').length - 1, 2, query);
  }
  // The imports pool keeps two warm (its own minReplicas); the ci pool takes the default, 0.
  assert.equal(find<Scaled>(ms, 'ScaledObject', 'taskline-tool-ci').spec.minReplicaCount, 0);
  assert.equal(find<Scaled>(ms, 'ScaledObject', 'taskline-tool-imports').spec.minReplicaCount, 2);
});

test('tool workers reach the scheduler and Redis, and only the scraper reaches their metrics', () => {
  const ms = withPools();
  type Policy = Manifest & {
    spec: {
      podSelector: { matchExpressions?: { values: string[] }[] };
      ingress: {
        from: {
          podSelector?: { matchLabels?: Record<string, string>; matchExpressions?: { values: string[] }[] };
        }[];
      }[];
    };
  };
  const control = find<Policy>(ms, 'NetworkPolicy', 'taskline-scheduler-control');
  assert.ok(
    control.spec.ingress[0]!.from.some(
      (f) => f.podSelector?.matchLabels?.['app.kubernetes.io/component'] === 'tool-worker',
    ),
    "control.spec.ingress[0]!.from.some((f) => f.podSelector?.matchLabels?.['app.kubernetes.io/component'] === 'tool-worker')",
  );
  const redis = find<Policy>(ms, 'NetworkPolicy', 'taskline-redis');
  assert.ok(
    redis.spec.ingress[0]!.from[0]!.podSelector!.matchExpressions![0]!.values.includes('tool-worker'),
    "redis.spec.ingress[0]!.from[0]!.podSelector!.matchExpressions![0]!.values.includes('tool-worker')",
  );
  const metrics = find<Policy>(ms, 'NetworkPolicy', 'taskline-metrics');
  assert.ok(
    metrics.spec.podSelector.matchExpressions![0]!.values.includes('tool-worker'),
    "metrics.spec.podSelector.matchExpressions![0]!.values.includes('tool-worker')",
  );
  const sm = find<Manifest & { spec: { selector: { matchExpressions: { values: string[] }[] } } }>(
    ms,
    'ServiceMonitor',
    'taskline',
  );
  assert.ok(
    sm.spec.selector.matchExpressions[0]!.values.includes('tool-worker'),
    "sm.spec.selector.matchExpressions[0]!.values.includes('tool-worker')",
  );
});

test('refused at render: a pool without image or tools, a bad name, TASKLINE_ or REDIS_ env, a name too long', () => {
  const bad: Record<string, string>[] = [
    { 'toolWorkers[0].name': 'ci', 'toolWorkers[0].tools[0]': 'x' },
    { 'toolWorkers[0].name': 'ci', 'toolWorkers[0].image': 'i:1' },
    { 'toolWorkers[0].name': 'CI', 'toolWorkers[0].image': 'i:1', 'toolWorkers[0].tools[0]': 'x' },
    { 'toolWorkers[0].name': 'ci', 'toolWorkers[0].image': 'i:1', 'toolWorkers[0].tools[0]': 'a b' },
    { 'toolWorkers[0].env.TASKLINE_TOOL_TENANTS': 'x' },
    { 'toolWorkers[0].env.REDIS_URL': 'redis://elsewhere' },
    { 'toolWorkers[0].replicass': '2' },
  ];
  for (const set of bad)
    assert.throws(
      () => render({ files: set['toolWorkers[0].name'] ? [] : [EXAMPLE], set }),
      /values don't meet the specifications|schema/,
      JSON.stringify(set),
    );
  assert.throws(
    () =>
      render({
        files: [EXAMPLE],
        set: { fullnameOverride: 'x'.repeat(40), 'toolWorkers[0].name': 'y'.repeat(20) },
      }),
    /longer than a Service name may be \(63\): shorten the pool's name/,
  );
});
