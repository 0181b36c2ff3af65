import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { render, type Manifest } from './helm-tool.js';
import { schemaProblems } from './k8s-schema.js';
import { pod } from './manifests.js';

// Pods that use no GPU stay off GPU nodes even where those nodes carry no taint: a required node
// affinity on the GPU node label, ANDed into whatever affinity the values give.

interface Term {
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
  matchFields?: unknown[];
}
interface Affinity {
  nodeAffinity?: {
    requiredDuringSchedulingIgnoredDuringExecution?: { nodeSelectorTerms: Term[] };
    preferredDuringSchedulingIgnoredDuringExecution?: unknown[];
  };
  podAntiAffinity?: unknown;
}
const affinity = (ms: Manifest[], kind: string, name: string) =>
  pod(ms, kind, name).affinity as Affinity | undefined;
const terms = (a: Affinity | undefined) =>
  a?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms ?? [];
const NOT_GPU = { key: 'nvidia.com/gpu.present', operator: 'NotIn', values: ['true'] };
/** Every term keeps the pod off GPU nodes (terms are ORed: one without it would let the pod on). */
const hasAvoid = (a: Affinity | undefined, expr: object = NOT_GPU) =>
  terms(a).length > 0 &&
  terms(a).every((t) => (t.matchExpressions ?? []).some((e) => JSON.stringify(e) === JSON.stringify(expr)));

function valuesFile(values: object): string {
  const file = join(mkdtempSync(join(tmpdir(), 'taskline-values-')), 'values.yaml');
  writeFileSync(file, stringify(values));
  return file;
}

const CPU_PODS: [string, string][] = [
  ['Deployment', 'taskline-api'],
  ['Deployment', 'taskline-scheduler'],
  ['StatefulSet', 'taskline-redis'],
  ['Deployment', 'taskline-gpu-worker'],
];

test('pods that use no GPU (api, scheduler, Redis, CPU workers) avoid GPU nodes by default', () => {
  const cpu = render({ set: { 'gpuWorker.gpusPerPod': '0' } });
  for (const [kind, name] of CPU_PODS)
    assert.ok(hasAvoid(affinity(cpu, kind, name)), `${name} avoids GPU nodes`);
  const cluster = render({ set: { 'redis.bundled.mode': 'cluster' } });
  assert.ok(hasAvoid(affinity(cluster, 'StatefulSet', 'taskline-redis')), 'Redis Cluster pods');
  assert.ok(hasAvoid(affinity(cluster, 'Job', 'taskline-redis-cluster-init')), 'the cluster-forming Job');
  // A worker that requests GPUs must land on one.
  assert.equal(terms(affinity(render(), 'Deployment', 'taskline-gpu-worker')).length, 0);
});

test('the GPU node label is configurable, and each component can turn avoidance off', () => {
  const label = render({
    set: {
      'gpuWorker.gpusPerPod': '0',
      'gpuNodeLabel.key': 'example.com/accelerator',
      'gpuNodeLabel.value': 'present',
    },
  });
  const expr = { key: 'example.com/accelerator', operator: 'NotIn', values: ['present'] };
  for (const [kind, name] of CPU_PODS) assert.ok(hasAvoid(affinity(label, kind, name), expr), name);
  const off = render({
    set: {
      'gpuWorker.gpusPerPod': '0',
      'api.avoidGpuNodes': 'false',
      'scheduler.avoidGpuNodes': 'false',
      'redis.bundled.avoidGpuNodes': 'false',
      'gpuWorker.avoidGpuNodes': 'false',
    },
  });
  for (const [kind, name] of CPU_PODS) assert.equal(terms(affinity(off, kind, name)).length, 0, name);
  // The scheduler keeps its default spread over nodes either way.
  assert.ok(
    affinity(off, 'Deployment', 'taskline-scheduler')?.podAntiAffinity,
    "affinity(off, 'Deployment', 'taskline-scheduler')?.podAntiAffinity",
  );
  assert.ok(
    affinity(render(), 'Deployment', 'taskline-scheduler')?.podAntiAffinity,
    "affinity(render(), 'Deployment', 'taskline-scheduler')?.podAntiAffinity",
  );
  assert.throws(() => render({ set: { 'api.avoidGpuNodes': 'maybe' } }), /schema|specifications/);
  assert.throws(() => render({ set: { 'gpuNodeLabel.key': '' } }), /schema|specifications/);
});

test("the avoidance is ANDed into every required term of the values' affinity; the rest is kept", async () => {
  const user: Affinity = {
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: {
        nodeSelectorTerms: [
          { matchExpressions: [{ key: 'topology.kubernetes.io/zone', operator: 'In', values: ['a'] }] },
          { matchFields: [{ key: 'metadata.name', operator: 'In', values: ['n1'] }] },
        ],
      },
      preferredDuringSchedulingIgnoredDuringExecution: [
        { weight: 1, preference: { matchExpressions: [{ key: 'pool', operator: 'In', values: ['cpu'] }] } },
      ],
    },
    podAntiAffinity: {
      preferredDuringSchedulingIgnoredDuringExecution: [
        {
          weight: 5,
          podAffinityTerm: {
            topologyKey: 'kubernetes.io/hostname',
            labelSelector: { matchLabels: { a: 'b' } },
          },
        },
      ],
    },
  };
  const set = { 'gpuWorker.gpusPerPod': '0' };
  const ms = render({
    set,
    files: [
      valuesFile({ api: { affinity: user }, scheduler: { affinity: user }, gpuWorker: { affinity: user } }),
    ],
  });
  for (const name of ['taskline-api', 'taskline-scheduler', 'taskline-gpu-worker']) {
    const a = affinity(ms, 'Deployment', name)!;
    assert.equal(terms(a).length, 2, name);
    assert.ok(hasAvoid(a), `${name}: every term avoids GPU nodes`);
    assert.deepEqual(
      terms(a)[0]!.matchExpressions![0],
      user.nodeAffinity!.requiredDuringSchedulingIgnoredDuringExecution!.nodeSelectorTerms[0]!
        .matchExpressions![0],
    );
    assert.deepEqual(
      terms(a)[1]!.matchFields,
      user.nodeAffinity!.requiredDuringSchedulingIgnoredDuringExecution!.nodeSelectorTerms[1]!.matchFields,
    );
    assert.deepEqual(
      a.nodeAffinity!.preferredDuringSchedulingIgnoredDuringExecution,
      user.nodeAffinity!.preferredDuringSchedulingIgnoredDuringExecution,
    );
    assert.deepEqual(a.podAntiAffinity, user.podAntiAffinity);
  }
  assert.deepEqual(await schemaProblems(ms), []);
});

test("api and scheduler replicas prefer different nodes unless the values' affinity says otherwise", () => {
  const spread = (a: Affinity | undefined) =>
    JSON.stringify(a?.podAntiAffinity ?? null).includes('"topologyKey":"kubernetes.io/hostname"');
  for (const name of ['taskline-api', 'taskline-scheduler']) {
    assert.ok(spread(affinity(render(), 'Deployment', name)), `${name}: one node down takes one replica`);
    const own = { podAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [] } };
    const component = name.replace('taskline-', '');
    const given = affinity(
      render({ files: [valuesFile({ [component]: { affinity: own } })] }),
      'Deployment',
      name,
    );
    assert.equal(given?.podAntiAffinity, undefined, `${name}: the values' affinity replaces the default`);
  }
});

test('the bundled Redis takes a node selector, tolerations, affinity, spread and a priority class', async () => {
  const placement = {
    nodeSelector: { pool: 'storage' },
    tolerations: [{ key: 'storage', operator: 'Exists', effect: 'NoSchedule' }],
    affinity: { podAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [] } },
    topologySpreadConstraints: [
      { maxSkew: 1, topologyKey: 'topology.kubernetes.io/zone', whenUnsatisfiable: 'ScheduleAnyway' },
    ],
    priorityClassName: 'datastore',
  };
  const ms = render({
    set: { 'redis.bundled.mode': 'cluster' },
    files: [valuesFile({ redis: { bundled: placement } })],
  });
  for (const [kind, name] of [
    ['StatefulSet', 'taskline-redis'],
    ['Job', 'taskline-redis-cluster-init'],
  ] as const) {
    const spec = pod(ms, kind, name);
    assert.deepEqual(spec.nodeSelector, placement.nodeSelector, name);
    assert.deepEqual(spec.tolerations, placement.tolerations, name);
    assert.equal(spec.priorityClassName, 'datastore', name);
    assert.ok(hasAvoid(spec.affinity as Affinity), `${name} still avoids GPU nodes`);
  }
  const redis = pod(ms, 'StatefulSet', 'taskline-redis');
  assert.deepEqual(redis.topologySpreadConstraints, placement.topologySpreadConstraints);
  assert.deepEqual((redis.affinity as { podAffinity: unknown }).podAffinity, placement.affinity.podAffinity);
  assert.deepEqual(await schemaProblems(ms), []);
});
