import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { ChildProcess } from 'node:child_process';
import { freePort } from '@taskline/testing';
import { OTHER_TENANT } from '@taskline/metrics';
import { EngineStack, exited, LONG, until } from '@taskline/test-support/engine-stack';
import { call, KEY_A, KEY_B, openSse, spawnApi, type ApiProcess } from '@taskline/api/test-helpers';
import { pollTask, rpc, TASKS } from '@taskline/test-support/mcp';

// Issue 6.1 on the real stack: Redis, a scheduler, gpu-workers and an api as processes, real
// LMSP, SSE and MCP traffic, then every service's /metrics scraped. Each metric family the issue
// names must have a sample with sensible labels, and tenant labels must stay bounded (top 1 here,
// with two tenants: one named, the other `other`).

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Prometheus text format, samples only (no HELP/TYPE lines). */
function parse(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries(
      [...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!]),
    );
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

async function scrape(url: string): Promise<Sample[]> {
  const res = await fetch(url);
  assert.equal(res.status, 200, `${url} answers`);
  return parse(await res.text());
}

/** The samples of `name` whose labels include `labels`. */
const find = (samples: Sample[], name: string, labels: Record<string, string> = {}) =>
  samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));

/** Asserts that some sample of `name` with `labels` has a value matching `ok` (default: > 0). */
function expectSample(
  service: string,
  samples: Sample[],
  name: string,
  labels: Record<string, string> = {},
  ok: (v: number) => boolean = (v) => v > 0,
): void {
  const found = find(samples, name, labels);
  assert.ok(
    found.some((s) => ok(s.value)),
    `${service}: no sample ${name}${JSON.stringify(labels)} with a fitting value; have ${JSON.stringify(found)}`,
  );
}

const MODEL = 'tiny-chat';
const TENANTS = new Set(['tenant-a', 'tenant-b']);
let cluster: EngineStack;
let api: ApiProcess;
let schedulerMetrics: string;
let workerMetrics: string;
let firstWorker: ChildProcess;
const ENV = {
  TASKLINE_METRICS_TENANT_TOP_N: '1',
  TASKLINE_WORKER_TIMEOUT_MS: '1000',
  TASKLINE_RECOVERY_INTERVAL_MS: '200',
};

before(async () => {
  const schedulerPort = await freePort();
  cluster = await EngineStack.start({ env: { ...ENV, TASKLINE_METRICS_PORT: String(schedulerPort) } });
  schedulerMetrics = `http://127.0.0.1:${schedulerPort}/metrics`;
  // Slowed decoding, so that a long generation is still running when it is cancelled or killed.
  firstWorker = cluster.startWorker({
    TASKLINE_WORKER_MIN_STEP_MS: '30',
    TASKLINE_WORKER_ID: 'metrics-w1',
    TASKLINE_METRICS_PORT: '0',
  });
  // Polling waits must not run into the per-tenant rate limit on a slow machine.
  api = await spawnApi(cluster.redis.url, {
    ...ENV,
    TASKLINE_RATE_LIMIT_PER_S: '1000',
    TASKLINE_RATE_LIMIT_BURST: '1000',
  });
});

after(async () => {
  api?.child.kill('SIGKILL');
  await cluster?.stop();
});

const create = async (body: Record<string, unknown>, key = KEY_A) => {
  const reply = await call(api.base, 'POST', '/lmsp/v1/tasks', { key, body });
  assert.equal(reply.status, 202, reply.text);
  return (reply.body as { id: string }).id;
};
const status = async (id: string, key = KEY_A) =>
  ((await call(api.base, 'GET', `/lmsp/v1/tasks/${id}`, { key })).body as { status: string }).status;
const waitStatus = (id: string, want: string[], key = KEY_A) =>
  until(`task ${id} to be ${want.join(' or ')}`, async () => {
    const s = await status(id, key);
    return want.includes(s) ? s : undefined;
  });

test('every metric family of issue 6.1 is observed on the live stack, with bounded tenant labels', async () => {
  // 1. A worker is SIGKILLed mid-generation; `on_restart: retry` runs the task again elsewhere.
  const killed = await create({ type: 'response', input: LONG, on_restart: 'retry' });
  await waitStatus(killed, ['running']);
  await cluster.waitForTokens(killed, 3);
  firstWorker.kill('SIGKILL');
  await exited(firstWorker);
  // No worker now: what tenant B creates waits in the ready index, which the scheduler exports.
  const waiting = await create(
    { type: 'response', input: { model: MODEL, input: 'Hi', max_output_tokens: 4 } },
    KEY_B,
  );
  const backlog = await until('the scheduler to export queue depth and oldest wait', async () => {
    const s = await scrape(schedulerMetrics);
    const ready =
      find(s, 'taskline_queue_oldest_wait_seconds', { model: MODEL }).length > 0 &&
      find(s, 'taskline_queue_depth', { model: MODEL }).some((x) => x.value > 0);
    return ready ? s : undefined;
  });
  const workerPort = await freePort();
  workerMetrics = `http://127.0.0.1:${workerPort}/metrics`;
  cluster.startWorker({
    TASKLINE_WORKER_MIN_STEP_MS: '30',
    TASKLINE_WORKER_ID: 'metrics-w2',
    TASKLINE_METRICS_PORT: String(workerPort),
  });
  assert.equal(await waitStatus(killed, ['succeeded', 'failed', 'cancelled']), 'succeeded');
  assert.equal(await waitStatus(waiting, ['succeeded', 'failed'], KEY_B), 'succeeded');

  // 2. A task read live over SSE to its end; the open stream shows in the gauge meanwhile.
  const streamed = await create({ type: 'response', input: LONG, on_restart: 'fail' });
  const sse = await openSse(api.base, `/lmsp/v1/tasks/${streamed}/events`);
  assert.equal(sse.status, 200);
  await until('the api to count the open SSE stream', async () => {
    const s = await scrape(`${api.metricsBase}/metrics`);
    return find(s, 'taskline_sse_streams_open', { protocol: 'lmsp' }).some((x) => x.value >= 1) || undefined;
  });
  await sse.done;
  assert.equal(sse.events.at(-1)?.event, 'response.completed');

  // 3. A running task cancelled.
  const cancelled = await create({ type: 'response', input: LONG, on_restart: 'fail' });
  await waitStatus(cancelled, ['running']);
  const cancel = await call(api.base, 'POST', `/lmsp/v1/tasks/${cancelled}/cancel`);
  assert.ok([200, 202].includes(cancel.status), cancel.text);
  assert.equal(await waitStatus(cancelled, ['cancelled', 'succeeded']), 'cancelled');

  // 4. An MCP tool call as a task, followed by a notifications listener and tasks/get.
  const mcp = `${api.base}/mcp`;
  const called = await rpc(
    mcp,
    'tools/call',
    { name: 'generate', arguments: { model: MODEL, input: 'Say hi.', max_output_tokens: 4 } },
    { token: KEY_A },
  );
  const taskId = called.message.result?.taskId as string;
  assert.ok(taskId, JSON.stringify(called.message));
  const listen = await openSse(api.base, '/mcp', {
    method: 'POST',
    headers: {
      accept: 'application/json, text/event-stream',
      'mcp-method': 'subscriptions/listen',
      'mcp-protocol-version': '2026-07-28',
    },
    body: {
      jsonrpc: '2.0',
      id: 7,
      method: 'subscriptions/listen',
      params: {
        notifications: { taskIds: [taskId] },
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientInfo': { name: 'test', version: '1' },
          'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS]: {} } },
        },
      },
    },
  });
  assert.equal(listen.status, 200);
  const during = await scrape(`${api.metricsBase}/metrics`);
  const done = await pollTask(mcp, taskId, (t) => t.status !== 'working', { token: KEY_A });
  assert.equal(done.status, 'completed');
  await listen.done;

  // Scrape every service once everything has settled.
  const apiSamples = await until('the api to see the MCP listener closed', async () => {
    const s = await scrape(`${api.metricsBase}/metrics`);
    return find(s, 'taskline_mcp_listeners_open').every((x) => x.value === 0) ? s : undefined;
  });
  const scheduler = await scrape(schedulerMetrics);
  const worker = await until('the worker to report its slots free', async () => {
    const s = await scrape(workerMetrics);
    return find(s, 'taskline_worker_slots', { model: MODEL, state: 'busy' }).some((x) => x.value === 0)
      ? s
      : undefined;
  });

  // HTTP by route pattern and status (never a raw path with an id in it).
  expectSample('api', apiSamples, 'taskline_http_requests_total', {
    route: '/lmsp/v1/tasks',
    method: 'POST',
    status: '202',
  });
  expectSample('api', apiSamples, 'taskline_http_request_duration_seconds_count', {
    route: '/lmsp/v1/tasks/:id',
    method: 'GET',
    status: '200',
  });
  for (const s of find(apiSamples, 'taskline_http_requests_total'))
    assert.doesNotMatch(s.labels.route!, /task_|resp_/, `route label ${s.labels.route} is a raw path`);
  // Transitions by kind and state, wherever they were committed.
  expectSample('api', apiSamples, 'taskline_task_transitions_total', { kind: 'response', state: 'queued' });
  expectSample('api', apiSamples, 'taskline_task_transitions_total', { kind: 'tool', state: 'queued' });
  expectSample('api', apiSamples, 'taskline_task_transitions_total', {
    kind: 'response',
    state: 'cancelling',
  });
  for (const state of ['loading', 'running', 'succeeded', 'cancelled'])
    expectSample('gpu-worker', worker, 'taskline_task_transitions_total', { kind: 'response', state });
  expectSample('gpu-worker', worker, 'taskline_task_transitions_total', { kind: 'tool', state: 'succeeded' });
  expectSample('scheduler', scheduler, 'taskline_task_transitions_total', {
    kind: 'response',
    state: 'queued',
  });
  // Queue wait, time to first token, decoding speed, end-to-end time.
  expectSample('gpu-worker', worker, 'taskline_task_queue_wait_seconds_count', {
    kind: 'response',
    model: MODEL,
  });
  expectSample('gpu-worker', worker, 'taskline_task_time_to_first_token_seconds_count', { model: MODEL });
  expectSample('gpu-worker', worker, 'taskline_task_output_tokens_per_second_count', { model: MODEL });
  expectSample('gpu-worker', worker, 'taskline_task_output_tokens_total', { model: MODEL });
  expectSample('gpu-worker', worker, 'taskline_task_duration_seconds_count', {
    kind: 'response',
    state: 'succeeded',
  });
  expectSample('gpu-worker', worker, 'taskline_task_duration_seconds_count', {
    kind: 'response',
    state: 'cancelled',
  });
  // Open streams and listeners: counted while open, back to zero after.
  expectSample('api', during, 'taskline_mcp_listeners_open', {}, (v) => v >= 1);
  expectSample('api', during, 'taskline_sse_streams_open', { protocol: 'mcp' }, (v) => v >= 1);
  expectSample('api', apiSamples, 'taskline_sse_streams_open', { protocol: 'lmsp' }, (v) => v === 0);
  expectSample('api', apiSamples, 'taskline_events_delivered_total', { protocol: 'lmsp' });
  // Measured from the writer's commit to the SSE write: what the event-delivery SLO is built on.
  expectSample('api', apiSamples, 'taskline_event_delivery_seconds_count', { protocol: 'lmsp' });
  // Worker slots, model load time.
  expectSample('gpu-worker', worker, 'taskline_worker_slots', { model: MODEL, state: 'free' });
  expectSample('gpu-worker', worker, 'taskline_model_load_seconds_count', { model: MODEL });
  // The SIGKILLed worker's lease expired and its task got its restart policy.
  expectSample('scheduler', scheduler, 'taskline_leases_expired_total');
  expectSample('scheduler', scheduler, 'taskline_restart_policies_applied_total', {
    kind: 'response',
    policy: 'retry',
  });
  // Redis latency by command or script name, on every service.
  expectSample('api', apiSamples, 'taskline_redis_command_duration_seconds_count', { command: 'tl_create' });
  expectSample('gpu-worker', worker, 'taskline_redis_command_duration_seconds_count', {
    command: 'tl_claim',
  });
  expectSample('scheduler', scheduler, 'taskline_redis_command_duration_seconds_count', {
    command: 'smembers',
  });
  for (const [service, samples] of [
    ['api', apiSamples],
    ['gpu-worker', worker],
    ['scheduler', scheduler],
  ] as const) {
    for (const s of find(samples, 'taskline_redis_command_duration_seconds_count'))
      assert.match(s.labels.command!, /^[a-z_.|-]+$/, `${service}: command label ${s.labels.command}`);
  }
  // Queue depth and wait per model and tenant, for autoscaling.
  expectSample('scheduler', backlog, 'taskline_queue_depth', { model: MODEL });
  expectSample('scheduler', backlog, 'taskline_queue_oldest_wait_seconds', { model: MODEL }, (v) => v >= 0);

  // Tenant labels: top 1 of two tenants, so at most one is named and the rest is `other`.
  const creates = find(apiSamples, 'taskline_task_creates_total', { outcome: 'accepted' });
  assert.ok(
    creates.some((s) => s.labels.protocol === 'mcp'),
    'MCP creates are counted',
  );
  const createTenants = new Set(creates.map((s) => s.labels.tenant));
  assert.ok(createTenants.has(OTHER_TENANT), `two tenants, top 1: one is other (${[...createTenants]})`);
  for (const [service, samples] of [
    ['api', apiSamples],
    ['gpu-worker', worker],
    ['scheduler', scheduler],
    ['scheduler', backlog],
  ] as const) {
    const byName = new Map<string, Set<string>>();
    for (const s of samples) {
      if (s.labels.tenant === undefined) continue;
      assert.ok(
        s.labels.tenant === OTHER_TENANT || TENANTS.has(s.labels.tenant),
        `${service}: unexpected tenant label ${s.labels.tenant} on ${s.name}`,
      );
      if (s.labels.tenant === OTHER_TENANT) continue;
      const named = byName.get(s.name) ?? new Set();
      named.add(s.labels.tenant);
      byName.set(s.name, named);
    }
    for (const [name, named] of byName)
      assert.ok(
        named.size <= 1,
        `${service}: ${name} names ${[...named]} with TASKLINE_METRICS_TENANT_TOP_N=1`,
      );
  }
});
