import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, startHaproxy, type LoadBalancer } from '@taskline/testing';
import { EngineStack, LONG, until } from '@taskline/test-support/engine-stack';
import { call, KEY_A, openSse, spawnApi, type ApiProcess } from '@taskline/api/test-helpers';
import { pollTask, rpc } from '@taskline/test-support/mcp';

// Issue 6.6: end-to-end flows through the load balancer of the local cluster's shape (Redis with
// AOF, two api replicas behind HAProxy with deploy/haproxy/haproxy.cfg, scheduler, worker), so
// that each multi-step flow crosses replicas. The test copy of the config balances round robin
// (the shipped one balances leastconn, which sequential requests of one client would not spread);
// each request carries an X-Request-Id naming its flow, and the replicas' JSON request logs say
// which replica served it.

let cluster: EngineStack;
let apis: ApiProcess[];
let proxy: LoadBalancer;
let dir: string;

before(async () => {
  cluster = await EngineStack.start({ env: { TASKLINE_RECOVERY_INTERVAL_MS: '200' } });
  // Slowed decoding, so a long generation is still running when it is read halfway or cancelled;
  // batches above 10 tokens ask for confirmation first.
  cluster.startWorker({ TASKLINE_WORKER_MIN_STEP_MS: '30', TASKLINE_BATCH_CONFIRM_ABOVE_TOKENS: '10' });
  // Polling waits must not run into the per-tenant rate limit on a slow machine.
  const env = { TASKLINE_RATE_LIMIT_PER_S: '1000', TASKLINE_RATE_LIMIT_BURST: '1000' };
  apis = await Promise.all([1, 2].map(() => spawnApi(cluster.redis.url, env)));
  dir = mkdtempSync(join(tmpdir(), 'taskline-e2e-'));
  const shipped = readFileSync(join(ROOT, 'deploy/haproxy/haproxy.cfg'), 'utf8');
  const roundRobin = shipped.replace(/^(\s*)balance leastconn$/m, '$1balance roundrobin');
  assert.notEqual(roundRobin, shipped, 'the shipped config balances leastconn');
  writeFileSync(join(dir, 'haproxy.cfg'), roundRobin);
  const ports = apis.map((a) => Number(new URL(a.base).port));
  proxy = await startHaproxy([ports[0]!, ports[1]!], { config: join(dir, 'haproxy.cfg') });
});

after(async () => {
  proxy?.child.kill('SIGKILL');
  for (const a of apis ?? []) a.child.kill('SIGKILL');
  await cluster?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Request ids for one flow: `<flow>-<n>`, so the replicas' logs can be searched for them. */
function flow(name: string) {
  let n = 0;
  return {
    id: () => `${name}-${++n}`,
    /** How many of this flow's requests each replica logged, waiting until all `n` are logged. */
    servedBy: () =>
      until(`every request of flow ${name} to be logged`, () => {
        const counts = apis.map(
          (a) =>
            a.logs.filter(
              (l) =>
                l.msg === 'request' &&
                typeof l.request_id === 'string' &&
                l.request_id.startsWith(`${name}-`),
            ).length,
        );
        return counts.reduce((x, y) => x + y, 0) >= n ? counts : undefined;
      }),
  };
}

function assertCrossed(name: string, counts: number[]): void {
  assert.ok(
    counts.every((c) => c > 0),
    `flow ${name} should be served by both replicas, got ${counts.join(' / ')} requests`,
  );
}

test('LMSP: create, read the event stream halfway, resume it with Last-Event-ID, completion', async () => {
  const f = flow('stream');
  const lb = proxy.lb;
  const created = await call(lb, 'POST', '/lmsp/v1/tasks', {
    body: { type: 'response', input: LONG, on_restart: 'fail' },
    headers: { 'x-request-id': f.id() },
  });
  assert.equal(created.status, 202, created.text);
  const id = (created.body as { id: string }).id;
  const path = `/lmsp/v1/tasks/${id}/events`;
  const first = await openSse(lb, path, { headers: { 'x-request-id': f.id() } });
  assert.equal(first.status, 200);
  await first.waitFor(6);
  first.abort();
  await first.done;
  const last = Number(first.events.at(-1)!.id);
  const rest = await openSse(lb, path, {
    headers: { 'x-request-id': f.id(), 'last-event-id': String(last) },
  });
  assert.equal(rest.status, 200);
  await rest.done;
  const seqs = [...first.events, ...rest.events].map((e) => Number(e.id));
  assert.deepEqual(
    seqs,
    seqs.map((_, i) => i + 1),
    'each event once, in order, across the two halves',
  );
  assert.equal(rest.events.at(-1)?.event, 'response.completed');
  const done = await call(lb, 'GET', `/lmsp/v1/tasks/${id}`, { headers: { 'x-request-id': f.id() } });
  assert.equal((done.body as { status: string }).status, 'succeeded');
  assertCrossed('stream', await f.servedBy());
});

test('LMSP: cancel a running task through the load balancer', async () => {
  const f = flow('cancel');
  const lb = proxy.lb;
  const headers = () => ({ 'x-request-id': f.id() });
  const created = await call(lb, 'POST', '/lmsp/v1/tasks', {
    body: { type: 'response', input: LONG, on_restart: 'fail' },
    headers: headers(),
  });
  assert.equal(created.status, 202, created.text);
  const id = (created.body as { id: string }).id;
  const status = async () =>
    ((await call(lb, 'GET', `/lmsp/v1/tasks/${id}`, { headers: headers() })).body as { status: string })
      .status;
  await until(`task ${id} to run`, async () => ((await status()) === 'running' ? true : undefined));
  const cancel = await call(lb, 'POST', `/lmsp/v1/tasks/${id}/cancel`, { headers: headers() });
  assert.ok([200, 202].includes(cancel.status), cancel.text);
  const end = await until(`task ${id} to end`, async () => {
    const s = await status();
    return ['cancelled', 'succeeded', 'failed'].includes(s) ? s : undefined;
  });
  assert.equal(end, 'cancelled');
  assertCrossed('cancel', await f.servedBy());
});

test('MCP: batch_generate asks for confirmation, answered with tasks/update, then tasks/get to completion', async () => {
  const f = flow('mcp');
  const url = `${proxy.lb}/mcp`;
  const opts = () => ({ token: KEY_A, headers: { 'x-request-id': f.id() } });
  const created = await rpc(
    url,
    'tools/call',
    {
      name: 'batch_generate',
      arguments: { model: 'tiny-chat', prompts: ['Say hi.', 'Say bye.'], max_output_tokens: 4 },
    },
    opts(),
  );
  assert.equal(created.message.result?.resultType, 'task', JSON.stringify(created.message));
  const taskId = created.message.result.taskId as string;
  const asking = await pollTask(url, taskId, (t) => t.status !== 'working', opts());
  assert.equal(asking.status, 'input_required', JSON.stringify(asking));
  assert.deepEqual(Object.keys(asking.inputRequests), ['confirm']);
  const update = await rpc(
    url,
    'tasks/update',
    { taskId, inputResponses: { confirm: { action: 'accept', content: { proceed: true } } } },
    opts(),
  );
  assert.equal(update.message.result?.resultType, 'complete', JSON.stringify(update.message));
  const done = await pollTask(url, taskId, (t) => !['working', 'input_required'].includes(t.status), opts());
  assert.equal(done.status, 'completed', JSON.stringify(done));
  assert.equal(done.result.structuredContent.results.length, 2);
  assertCrossed('mcp', await f.servedBy());
});
