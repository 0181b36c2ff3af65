/**
 * `ctx.awaitCallback` through real processes: a tool worker with one slot starts an outside job
 * (a real HTTP server here, the "job system", which gets the callback URL) and waits. Waiting
 * holds no slot: a second task of the same tool runs meanwhile. The callback, posted after the
 * worker was SIGKILLed and replaced, completes the task with its body, once; the URL then is
 * used; a task whose callback never comes fails at its deadline; bad URLs and bodies get
 * problem+json, and the task's MCP caller can neither see nor answer the callback.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startApi, type Replica } from '@taskline/test-support/mcp-stack';
import { rpc } from '@taskline/test-support/mcp';
import { EngineStack } from '@taskline/test-support/engine-stack';
import { until } from '@taskline/testing';
import { KEY_A, LONG_LEASE, TOOLS_ENV, toolWorker } from './helpers.js';

const PUBLIC_URL = 'https://taskline.test';
const ENV = {
  ...TOOLS_ENV,
  TASKLINE_WEBHOOK_LINK_SECRET: 'callback-secret-0123456789abcdef0123',
  TASKLINE_PUBLIC_URL: PUBLIC_URL,
  TASKLINE_RECOVERY_INTERVAL_MS: '200',
};

interface Started {
  job: string;
  url: string;
  task: string;
  attempt: number;
}

describe('a tool awaiting a callback', () => {
  let cluster: EngineStack;
  let api: Replica;
  let base: string;
  let jobs: Server;
  const started: Started[] = [];

  before(async () => {
    // The outside job system: records each job it is asked to start, with its callback URL.
    jobs = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        started.push(JSON.parse(Buffer.concat(chunks).toString()) as Started);
        res.end();
      });
    });
    await new Promise<void>((resolve) => jobs.listen(0, '127.0.0.1', resolve));
    cluster = await EngineStack.start({ env: ENV });
    api = await startApi(cluster);
    base = api.url.replace(/\/mcp$/, '');
  });
  after(async () => {
    await cluster.stop();
    await new Promise<void>((resolve) => jobs.close(() => resolve()));
  });

  const sink = () => ({ CALLBACK_SINK: `http://127.0.0.1:${(jobs.address() as AddressInfo).port}/` });

  async function call(job: string, timeoutMs?: number): Promise<string> {
    const reply = await rpc(
      api.url,
      'tools/call',
      { name: 'await_job', arguments: { job, ...(timeoutMs && { timeoutMs }) } },
      { token: KEY_A },
    );
    const id = reply.message.result?.taskId as string;
    assert.ok(id, JSON.stringify(reply.message));
    return id;
  }

  const startedJob = (job: string) =>
    until(`job ${job} started`, async () => started.find((s) => s.job === job));

  /** POSTs to a callback URL, on the api under test (the URL names the public address). */
  async function post(url: string, body: string, type = 'application/json') {
    const res = await fetch(`${base}${new URL(url).pathname}`, {
      method: 'POST',
      headers: { 'content-type': type },
      body,
    });
    return {
      status: res.status,
      type: res.headers.get('content-type'),
      body: (await res.json()) as Record<string, unknown>,
    };
  }

  it('holds no slot, completes once with the body posted after a worker SIGKILL and restart', async () => {
    const first = await toolWorker(cluster, 'callbacks.ts', sink());
    const a = await call('build-a');
    const jobA = await startedJob('build-a');
    assert.ok(jobA.url.startsWith(`${PUBLIC_URL}/lmsp/v1/callbacks/`), jobA.url);
    await cluster.waitFor(a, 'parked', (t) => t.status === 'input_required');
    // The tool has one slot: a second task can only start its job if the first holds none.
    const b = await call('build-b');
    const jobB = await startedJob('build-b');
    await cluster.waitFor(b, 'parked', (t) => t.status === 'input_required');

    await first.kill('SIGKILL');
    const second = await toolWorker(cluster, 'callbacks.ts', { ...sink(), ...LONG_LEASE });
    try {
      const taken = await post(jobA.url, JSON.stringify({ ok: true, artifact: 'a.tar' }));
      assert.equal(taken.status, 200, JSON.stringify(taken.body));
      assert.equal(taken.body.task_id, a);
      const done = await cluster.waitForEnd(a, 30_000);
      assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
      const result = done.result as { structuredContent: { body: unknown; attempt: number } };
      assert.deepEqual(result.structuredContent.body, { ok: true, artifact: 'a.tar' });
      assert.equal(result.structuredContent.attempt, 2);
      // The attempt the callback resumed did not start the job again.
      assert.equal(started.filter((s) => s.job === 'build-a').length, 1);

      const again = await post(jobA.url, JSON.stringify({ ok: false }));
      assert.equal(again.status, 410);
      assert.match(again.type ?? '', /application\/problem\+json/);
      assert.equal(again.body.code, 'callback_used');

      assert.equal((await post(jobB.url, JSON.stringify([1, 2]))).status, 200);
      const doneB = await cluster.waitForEnd(b, 30_000);
      assert.equal(doneB.status, 'succeeded', JSON.stringify(doneB.error));
      assert.deepEqual(
        (doneB.result as { structuredContent: { body: unknown } }).structuredContent.body,
        [1, 2],
      );
    } finally {
      await second.kill('SIGTERM');
    }
  });

  it('fails at its deadline with callback_timeout when no callback comes; the URL is then refused', async () => {
    const worker = await toolWorker(cluster, 'callbacks.ts', sink());
    try {
      const id = await call('never', 1500);
      const job = await startedJob('never');
      const done = await cluster.waitForEnd(id, 30_000);
      assert.equal(done.status, 'failed');
      assert.equal(done.error?.code, 'callback_timeout');
      const late = await post(job.url, JSON.stringify({ ok: true }));
      assert.equal(late.status, 403);
      assert.equal(late.body.code, 'callback_refused');
    } finally {
      await worker.kill('SIGTERM');
    }
  });

  it('refuses bad URLs and bad bodies with problem+json, without touching the task', async () => {
    const worker = await toolWorker(cluster, 'callbacks.ts', sink());
    try {
      const id = await call('guarded');
      const job = await startedJob('guarded');
      await cluster.waitFor(id, 'parked', (t) => t.status === 'input_required');
      const token = new URL(job.url).pathname.split('/').pop()!;
      const [payload, sig] = token.split('.') as [string, string];
      const forged = `${PUBLIC_URL}/lmsp/v1/callbacks/${payload}.${sig.slice(0, -2)}${sig.endsWith('AA') ? 'BB' : 'AA'}`;
      for (const url of [`${PUBLIC_URL}/lmsp/v1/callbacks/nonsense`, forged]) {
        const refused = await post(url, '{}');
        assert.equal(refused.status, 403, url);
        assert.match(refused.type ?? '', /application\/problem\+json/);
        assert.equal(refused.body.code, 'callback_refused');
      }
      const notJson = await post(job.url, '{"ok": ');
      assert.equal(notJson.status, 400);
      assert.equal(notJson.body.code, 'invalid_request');
      const notTyped = await post(job.url, 'done', 'text/plain');
      assert.equal(notTyped.status, 400);
      assert.equal(notTyped.body.code, 'invalid_request');
      // Its caller neither sees the callback as a question nor answers it through MCP.
      const seen = (await rpc(api.url, 'tasks/get', { taskId: id }, { token: KEY_A })).message.result;
      assert.equal(seen?.status, 'input_required');
      assert.deepEqual(seen?.inputRequests, {});
      await rpc(
        api.url,
        'tasks/update',
        { taskId: id, inputResponses: { 'callback:done': { ok: 'from the caller' } } },
        { token: KEY_A },
      );
      // None of them answered it: the right one still does.
      assert.equal((await cluster.store.get(id))?.status, 'input_required');
      assert.equal((await post(job.url, JSON.stringify({ ok: true }))).status, 200);
      assert.equal((await cluster.waitForEnd(id, 30_000)).status, 'succeeded');
    } finally {
      await worker.kill('SIGTERM');
    }
  });
});
