import assert from 'node:assert/strict';
import type { Manifest } from './helm-tool.js';

/** The parts of rendered manifests the chart tests read. */
export interface Container {
  name: string;
  image: string;
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  args?: string[];
  ports?: { name: string; containerPort: number }[];
  readinessProbe?: Record<string, unknown>;
  livenessProbe?: Record<string, unknown>;
  startupProbe?: Record<string, unknown>;
  lifecycle?: { preStop?: { sleep?: { seconds: number } } };
  resources?: { limits?: Record<string, unknown>; requests?: Record<string, unknown> };
  volumeMounts?: { name: string; mountPath: string }[];
}
export interface PodSpec extends Record<string, unknown> {
  containers: Container[];
  initContainers?: Container[];
  volumes?: ({ name: string } & Record<string, unknown>)[];
  terminationGracePeriodSeconds?: number;
}
export interface Workload extends Manifest {
  spec: { replicas?: number; template: { metadata: { annotations: Record<string, string> }; spec: PodSpec } };
}

export function find<T = Manifest>(ms: Manifest[], kind: string, name: string): T {
  const m = ms.find((x) => x.kind === kind && x.metadata.name === name);
  assert.ok(m, `no ${kind} ${name}`);
  return m as T;
}
export const pod = (ms: Manifest[], kind: string, name: string) =>
  find<Workload>(ms, kind, name).spec.template.spec;
export function env(c: Container, name: string) {
  return c.env?.find((e) => e.name === name);
}
export function configMap(ms: Manifest[]): Record<string, string> {
  return find<{ data: Record<string, string> }>(ms, 'ConfigMap', 'taskline').data;
}
export const WORKLOADS: [string, string][] = [
  ['Deployment', 'taskline-api'],
  ['Deployment', 'taskline-scheduler'],
  ['Deployment', 'taskline-gpu-worker'],
];
