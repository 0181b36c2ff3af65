import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { loadEnv, type Env } from '@taskline/config';
import { controlSecurityFromEnv } from '@taskline/control';
import { ROOT } from './promql.js';

// deploy/compose.yaml as the services would read it: each container is a host of its own, so
// loopback reaches only itself, and the other services are reached by their compose names.

interface Service {
  environment?: Record<string, string>;
  ports?: string[];
  deploy?: { resources?: { reservations?: { devices?: { capabilities?: string[] }[] } } };
}

/** A value a caller gives a required variable (`${NAME:?message}`). */
const REQUIRED = 'caller-given-value-0123456789abcdef';

/** `${NAME:-default}` as compose resolves it with nothing set in the caller's environment. */
const interpolate = (value: string) =>
  String(value)
    .replace(/\$\{[A-Z0-9_]+:-([^}]*)\}/g, '$1')
    .replace(/\$\{[A-Z0-9_]+:\?[^}]*\}/g, REQUIRED);

const compose = parse(readFileSync(`${ROOT}deploy/compose.yaml`, 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
};

/** A service's settings after loadEnv: its environment over the defaults of packages/config. */
function settings(name: string): Env {
  const raw = compose.services[name]?.environment ?? {};
  const env = Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, interpolate(v)]));
  return loadEnv(env);
}

const hostPort = (addr: string) => {
  const i = addr.lastIndexOf(':');
  return { host: addr.slice(0, i), port: Number(addr.slice(i + 1)) };
};

test('compose: workers reach the scheduler control plane across containers', () => {
  const scheduler = settings('scheduler');
  const worker = settings('gpu-worker');
  // Dispatch counts only the slots workers report over gRPC: a worker that cannot connect never
  // gets a task. A scheduler listening on its own loopback is out of every other container's reach.
  assert.ok(
    !['127.0.0.1', 'localhost', '::1'].includes(scheduler.TASKLINE_CONTROL_HOST),
    `scheduler listens on ${scheduler.TASKLINE_CONTROL_HOST}`,
  );
  const advertised = hostPort(
    scheduler.TASKLINE_CONTROL_ADVERTISE ||
      `${scheduler.TASKLINE_CONTROL_HOST}:${scheduler.TASKLINE_CONTROL_PORT}`,
  );
  assert.deepEqual(advertised, { host: 'scheduler', port: scheduler.TASKLINE_CONTROL_PORT }, 'advertised');
  for (const addr of worker.TASKLINE_SCHEDULER_ADDR.split(','))
    assert.deepEqual(hostPort(addr), { host: 'scheduler', port: scheduler.TASKLINE_CONTROL_PORT }, addr);
});

test('compose: a worker that reserves a GPU runs the CUDA provider on it', () => {
  const devices = compose.services['gpu-worker']?.deploy?.resources?.reservations?.devices ?? [];
  assert.ok(
    devices.some((d) => d.capabilities?.includes('gpu')),
    'the worker reserves a GPU',
  );
  assert.equal(settings('gpu-worker').TASKLINE_EXECUTION_PROVIDER, 'cuda');
});

test('compose: the api has a credential to call it with, and every service starts on its settings', () => {
  for (const name of ['api', 'scheduler', 'gpu-worker']) settings(name);
  const api = settings('api');
  assert.ok(
    api.TASKLINE_API_KEYS || api.TASKLINE_JWT_PUBLIC_KEY || api.TASKLINE_JWT_JWKS_URL,
    'no API key or JWT setting: every request would be 401, and keys made by the CLI need a Redis the compose stack does not publish',
  );
});

// Prometheus holds the tenant-labelled metrics the api keeps off its own port, and Grafana lets
// anyone in anonymously: published on every interface, the whole network could read them.
test('compose: every published port is on this machine only', () => {
  const published = Object.entries(compose.services).flatMap(([name, s]) =>
    (s.ports ?? []).map((p) => [name, p] as const),
  );
  assert.ok(
    published.some(([name]) => name === 'grafana'),
    "published.some(([name]) => name === 'grafana')",
  );
  for (const [name, port] of published) assert.match(port, /^127\.0\.0\.1:\d+:\d+$/, `${name}: ${port}`);
});

test('compose: the control plane admits workers by a token the caller must give', () => {
  const raw = (name: string) => compose.services[name]?.environment?.TASKLINE_CONTROL_TOKEN ?? '';
  for (const name of ['scheduler', 'gpu-worker']) {
    // Required, never a default in the file: a default would be the same known token everywhere.
    assert.match(raw(name), /^\$\{TASKLINE_CONTROL_TOKEN:\?[^}]+\}$/, name);
    const env = settings(name);
    const side = name === 'scheduler' ? 'scheduler' : 'worker';
    assert.deepEqual(controlSecurityFromEnv(env, side), { tokens: [REQUIRED], tls: null }, name);
  }
});
