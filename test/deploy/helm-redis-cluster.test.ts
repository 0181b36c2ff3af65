import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CHART, CRDS, render, type Manifest } from './helm-tool.js';
import { find } from './manifests.js';

// The in-chart Redis Cluster (redis.bundled.mode: cluster), rendered by real Helm; every render
// is also checked against the Kubernetes schemas by helm.test.ts (it renders every example).
interface Container {
  name: string;
  args?: string[];
  command?: string[];
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  ports?: { name: string; containerPort: number }[];
}
interface Pod {
  containers: Container[];
  affinity?: { podAntiAffinity?: { preferredDuringSchedulingIgnoredDuringExecution?: unknown[] } };
}
interface Workload extends Manifest {
  spec: {
    replicas?: number;
    podManagementPolicy?: string;
    template: { spec: Pod };
    volumeClaimTemplates?: unknown[];
  };
}

const clusterExample = () =>
  render({ files: [`${CHART}/examples/redis-cluster-in-chart.yaml`], apiVersions: CRDS });
const NODES = [0, 1, 2, 3, 4, 5].map((i) => `taskline-redis-${i}.taskline-redis.taskline.svc:6379`).join(',');

test('cluster mode runs 6 cluster-enabled Redis pods with AOF fsynced always, on their own volumes, spread over nodes', () => {
  const ms = clusterExample();
  const sts = find<Workload>(ms, 'StatefulSet', 'taskline-redis');
  assert.equal(sts.spec.replicas, 6);
  assert.equal(sts.spec.podManagementPolicy, 'Parallel');
  assert.equal(sts.spec.volumeClaimTemplates?.length, 1);
  const args = sts.spec.template.spec.containers[0]!.args!;
  const arg = (flag: string) => args[args.indexOf(flag) + 1];
  assert.equal(arg('--cluster-enabled'), 'yes');
  assert.equal(arg('--appendonly'), 'yes');
  assert.equal(arg('--appendfsync'), 'always');
  assert.equal(arg('--cluster-config-file'), '/data/nodes.conf', 'node identity kept on the volume');
  assert.equal(arg('--masterauth'), '$(REDIS_PASSWORD)', 'replicas authenticate to their primary');
  assert.ok(
    sts.spec.template.spec.affinity?.podAntiAffinity?.preferredDuringSchedulingIgnoredDuringExecution,
    'sts.spec.template.spec.affinity?.podAntiAffinity?.preferredDuringSchedulingIgnoredDuringExecution',
  );
  const svc = find<{
    spec: { clusterIP: string; publishNotReadyAddresses: boolean; ports: { port: number }[] };
  }>(ms, 'Service', 'taskline-redis');
  assert.equal(svc.spec.clusterIP, 'None');
  assert.equal(svc.spec.publishNotReadyAddresses, true);
  assert.deepEqual(
    svc.spec.ports.map((p) => p.port),
    [6379, 16379],
  );
  const pdb = find<{ spec: { maxUnavailable: number } }>(ms, 'PodDisruptionBudget', 'taskline-redis');
  assert.equal(pdb.spec.maxUnavailable, 1);
});

test('cluster mode gives every service the seed nodes and the password from the Secret, no REDIS_URL', () => {
  const ms = clusterExample();
  for (const name of ['taskline-api', 'taskline-scheduler', 'taskline-gpu-worker']) {
    const c = find<Workload>(ms, 'Deployment', name).spec.template.spec.containers[0]!;
    const env = (n: string) => c.env?.find((e) => e.name === n);
    assert.equal(env('TASKLINE_REDIS_CLUSTER_NODES')?.value, NODES, name);
    assert.deepEqual(env('REDIS_PASSWORD')?.valueFrom?.secretKeyRef, {
      name: 'taskline-redis',
      key: 'password',
    });
    assert.equal(env('TASKLINE_REDIS_PASSWORD')?.value, '$(REDIS_PASSWORD)');
    assert.equal(env('REDIS_URL'), undefined, name);
  }
});

test('a post-install/upgrade hook Job forms the cluster with one replica per primary, only when not formed yet', () => {
  const ms = clusterExample();
  const job = find<Workload>(ms, 'Job', 'taskline-redis-cluster-init');
  assert.equal(
    (job.metadata as { annotations?: Record<string, string> }).annotations?.['helm.sh/hook'],
    'post-install,post-upgrade',
  );
  const c = job.spec.template.spec.containers[0]!;
  const script = c.args!.join('\n');
  assert.match(script, /redis-cli --cluster create \$ips --cluster-replicas 1 --cluster-yes/);
  // Created only when every pod is still alone (knows no other node): a re-run never re-creates.
  assert.match(script, /grep -q '\^cluster_known_nodes:1\[\^0-9\]'; then\n *alone=\$\(\(alone \+ 1\)\)/);
  assert.match(script, /if \[ "\$alone" = 6 \]; then\n[^\n]*\n *redis-cli --cluster create/);
  assert.deepEqual(c.env?.find((e) => e.name === 'REDISCLI_AUTH')?.valueFrom?.secretKeyRef, {
    name: 'taskline-redis',
    key: 'password',
  });
  assert.equal(
    c.env?.find((e) => e.name === 'NODES')?.value,
    NODES.replaceAll(':6379', '').replaceAll(',', ' '),
  );
});

test('the NetworkPolicy lets the cluster pods gossip and the init Job in, and nothing else new', () => {
  const policy = find<{
    spec: {
      ingress: {
        from: { podSelector: { matchLabels: Record<string, string> } }[];
        ports: { port: number }[];
      }[];
    };
  }>(clusterExample(), 'NetworkPolicy', 'taskline-redis');
  const rules = policy.spec.ingress.map((r) => [
    r.from[0]!.podSelector.matchLabels['app.kubernetes.io/component'],
    r.ports.map((p) => p.port),
  ]);
  assert.deepEqual(rules, [
    [undefined, [6379]],
    ['redis', [6379, 16379]],
    ['redis-cluster-init', [6379]],
  ]);
});

test('standalone stays the default: one Redis, REDIS_URL, no Job; the schema refuses an unknown mode', () => {
  const ms = render();
  assert.equal(find<Workload>(ms, 'StatefulSet', 'taskline-redis').spec.replicas, 1);
  assert.equal(
    ms.find((m) => m.kind === 'Job'),
    undefined,
  );
  assert.equal(
    ms.find((m) => m.kind === 'PodDisruptionBudget' && m.metadata.name === 'taskline-redis'),
    undefined,
  );
  assert.throws(
    () => render({ set: { 'redis.bundled.mode': 'sentinel' } }),
    /values don't meet the specifications|schema/,
  );
});

test('an external cluster is named by a redis-cluster:// seed URL, which the schema accepts', () => {
  const ms = render({
    set: {
      'redis.bundled.enabled': 'false',
      'redis.url': 'rediss-cluster://default:pw@c.example.internal:6379',
    },
  });
  const secret = find<{ stringData: Record<string, string> }>(ms, 'Secret', 'taskline-redis');
  assert.equal(secret.stringData.url, 'rediss-cluster://default:pw@c.example.internal:6379');
  assert.equal(
    ms.find((m) => m.kind === 'StatefulSet'),
    undefined,
  );
  assert.throws(
    () => render({ set: { 'redis.bundled.enabled': 'false', 'redis.url': 'cluster://x:1' } }),
    /values don't meet the specifications|schema/,
  );
});
