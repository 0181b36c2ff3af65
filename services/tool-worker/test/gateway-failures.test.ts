/**
 * Upstreams that misbehave: one that hangs, answers garbage, answers a JSON-RPC error, answers too
 * much, dies, or asks what Taskline cannot relay (sampling; a question while other calls are in flight). Each task ends with a clear error within the
 * configured timeout, the other upstream keeps answering, a cancel reaches the upstream as
 * `notifications/cancelled`, an upstream down at start serves nothing while the rest run, and a
 * tool the upstream withdraws (`notifications/tools/list_changed`) leaves the list.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EngineStack } from '@taskline/test-support/engine-stack';
import type { Replica } from '@taskline/test-support/mcp-stack';
import { rpc } from '@taskline/test-support/mcp';
import { until } from '@taskline/testing';
import { KEY_A, list2026, startOneApiToolStack } from './helpers.js';
import { EVERYTHING, FLAKY, gatewayWorker, stdioUpstream, textOf } from './upstreams.js';

/**
 * The flaky upstream's call timeout: long enough that a slow call stays in flight while a second
 * call goes through api, scheduler and worker on a starved host (the "calls in flight" test).
 */
const TIMEOUT_MS = 4000;

describe('the gateway with upstreams that hang, die or answer garbage', () => {
  let cluster: EngineStack;
  let api: Replica;
  let dir: string;
  let worker: Awaited<ReturnType<typeof gatewayWorker>>;
  const counted = () => readFile(join(dir, 'calls'), 'utf8').catch(() => '');
  before(async () => {
    ({ cluster, api } = await startOneApiToolStack());
    dir = await mkdtemp(join(tmpdir(), 'gateway-flaky-'));
    worker = await gatewayWorker(
      cluster,
      [
        stdioUpstream('bad', FLAKY, [], {
          timeoutMs: TIMEOUT_MS,
          transport: {
            type: 'stdio',
            command: process.execPath,
            args: [FLAKY],
            env: { COUNT_FILE: join(dir, 'calls') },
          },
        }),
        stdioUpstream('gone', join(dir, 'no-such-server.mjs')),
        stdioUpstream('ev', EVERYTHING, ['stdio'], { tools: ['echo'] }),
      ],
      { TASKLINE_UPSTREAM_MAX_RESULT_BYTES: '100000' },
    );
  });
  after(async () => {
    await cluster?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** Calls `name` as a task and returns it ended, with how long it took from the call. */
  async function ended(name: string, args: Record<string, unknown> = {}) {
    const started = Date.now();
    const call = await rpc(api.url, 'tools/call', { name, arguments: args }, { token: KEY_A });
    const id = call.message.result?.taskId as string;
    assert.ok(id, JSON.stringify(call.message));
    const task = await cluster.waitForEnd(id, 20_000);
    return { task, ms: Date.now() - started };
  }

  const echo = async () => textOf((await ended('ev_echo', { message: 'still here' })).task.result);

  it('reports an upstream that is down at start (log, metric) and serves the others', async () => {
    const listed = await list2026(api.url, KEY_A);
    assert.ok(listed.includes('bad_hang') && listed.includes('ev_echo'), listed.join());
    assert.ok(!listed.some((n) => n.startsWith('gone_')), listed.join());
    const down = worker.logs.find((l) => l.msg === 'upstream_down' || l.event === 'upstream_down');
    assert.ok(down, 'an upstream_down line');
    assert.equal(down.upstream, 'gone');
    const ready = worker.logs.find((l) => l.msg === 'ready' || l.event === 'ready');
    const metrics = await (await fetch(`http://127.0.0.1:${String(ready?.metrics_port)}/metrics`)).text();
    assert.match(metrics, /^taskline_upstream_up\{[^}]*upstream="gone"[^}]*\} 0$/m);
    assert.match(metrics, /^taskline_upstream_up\{[^}]*upstream="bad"[^}]*\} 1$/m);
  });

  it('relays a last progress that arrives in the same read as the result', async () => {
    const { task } = await ended('bad_lastword');
    assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
    const progress = (await cluster.events(task.id)).map((e) => e.status_message).filter(Boolean);
    assert.deepEqual(progress, ['last word']);
  });

  it('fails a call the upstream never answers within its timeout; the other upstream still answers meanwhile', async () => {
    const hanging = ended('bad_hang');
    assert.equal(await echo(), 'Echo: still here');
    const { task, ms } = await hanging;
    assert.equal(task.status, 'failed');
    assert.equal(task.error?.code, 'tool_failed');
    assert.match(task.error?.detail ?? '', new RegExp(`upstream bad did not answer within ${TIMEOUT_MS} ms`));
    assert.ok(ms >= TIMEOUT_MS, `ended after ${ms} ms, before the timeout`);
  });

  it('fails a call answered with garbage, a JSON-RPC error, or a result above the size bound, naming why', async () => {
    const garbage = (await ended('bad_garbage')).task;
    assert.equal(garbage.status, 'failed');
    assert.match(
      garbage.error?.detail ?? '',
      /upstream bad answered something that is not a tools\/call result/,
    );
    const error = (await ended('bad_rpcerror')).task;
    assert.equal(error.status, 'failed');
    assert.match(error.error?.detail ?? '', /upstream bad answered JSON-RPC error 4242: .*upstream says no/);
    const big = (await ended('bad_big')).task;
    assert.equal(big.status, 'failed');
    assert.match(big.error?.detail ?? '', /above the limit of 100000 \(TASKLINE_UPSTREAM_MAX_RESULT_BYTES\)/);
  });

  it('fails the call of an upstream that dies, then restarts it for the next call', async () => {
    const died = (await ended('bad_die')).task;
    assert.equal(died.status, 'failed');
    assert.match(died.error?.detail ?? '', /upstream bad closed the connection before answering/);
    const again = (await ended('bad_echo', { ms: 1 })).task;
    assert.equal(again.status, 'succeeded', JSON.stringify(again.error));
    assert.equal(await echo(), 'Echo: still here');
  });

  it('answers an upstream request it cannot relay (sampling) with an error at once, not a hang', async () => {
    const { task } = await ended('bad_asks');
    assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
    const answer = JSON.parse(textOf(task.result)) as { error?: { code: number } };
    // Answered, not hung: a request left unanswered would have ended the call failed at the timeout.
    assert.equal(answer.error?.code, -32601);
  });

  it('refuses to relay a question while other calls to its upstream are in flight (it could not tell whose)', async () => {
    const calls = async () => (await counted()).split('\n').filter((l) => l === 'call').length;
    const before = await calls();
    // Within the upstream's timeout, and in flight while the second call is made.
    const slow = ended('bad_slow', { ms: TIMEOUT_MS - 500 });
    await until('bad_slow running', async () => ((await calls()) > before ? true : undefined), 5000);
    const { task } = await ended('bad_elicits');
    assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
    const answer = JSON.parse(textOf(task.result)) as { error?: { message: string } };
    assert.match(answer.error?.message ?? '', /2 calls in flight, so the question cannot be relayed/);
    assert.equal((await slow).task.status, 'succeeded');
  });

  it('sends notifications/cancelled upstream when the caller cancels', async () => {
    const call = await rpc(
      api.url,
      'tools/call',
      { name: 'bad_slow', arguments: { ms: 10_000 } },
      { token: KEY_A },
    );
    const id = call.message.result?.taskId as string;
    await cluster.waitFor(id, 'running upstream', (t) => /\/100$/.test(t.statusMessage ?? ''), 10_000);
    const cancel = await rpc(api.url, 'tasks/cancel', { taskId: id }, { token: KEY_A });
    assert.ok(!cancel.message.error, JSON.stringify(cancel.message));
    assert.equal((await cluster.waitForEnd(id, 10_000)).status, 'cancelled');
    await until(
      'the upstream told',
      async () => ((await counted()).includes('cancelled') ? true : undefined),
      5000,
    );
  });

  it('withdraws a tool the upstream stops listing (notifications/tools/list_changed)', async () => {
    assert.ok(
      (await list2026(api.url, KEY_A)).includes('bad_hang'),
      "(await list2026(api.url, KEY_A)).includes('bad_hang')",
    );
    assert.equal((await ended('bad_shrink')).task.status, 'succeeded');
    await until(
      'bad_hang withdrawn',
      async () => ((await list2026(api.url, KEY_A)).includes('bad_hang') ? undefined : true),
      5000,
    );
    assert.ok((await list2026(api.url, KEY_A)).includes('bad_echo'), 'the upstream keeps its other tools');
  });
});
