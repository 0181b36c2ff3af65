/**
 * A keyless, non-background `POST /responses` is a call its caller holds open: when the caller
 * goes, nobody is left to read the result, and the task is cancelled. The replica holding the
 * call may go too (killed, its node lost): then the call's lease in Redis lapses and the
 * scheduler cancels the task. Two real api replicas, a real scheduler and gpu-worker.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { skewedClock } from '@taskline/testing';
import { EngineStack, LONG, until } from '@taskline/test-support/engine-stack';
import { KEY_A, spawnApi, type ApiProcess } from './helpers.js';

let cluster: EngineStack;
let a: ApiProcess;
let b: ApiProcess;
/** A replica whose host clock runs 10 s behind the scheduler's. */
let behind: ApiProcess;

/** Short enough that a test sees several leases pass; the scheduler looks every 200 ms. */
const CALLER_LEASE_MS = 1500;
const sdk = (api: ApiProcess) =>
  new OpenAI({ apiKey: KEY_A, baseURL: `${api.base}/lmsp/v1`, maxRetries: 0, timeout: 120_000 });
const taskIdOf = (responseId: string) => `task_${responseId.slice('resp_'.length)}`;

/** A call through `api` that outlives several caller leases completes: never cancelled. */
async function keptThroughLeases(api: ApiProcess): Promise<void> {
  // Timed here: the record's created_at and ended_at are two hosts' clocks (api and worker).
  const started = Date.now();
  const response = await sdk(api).responses.create({ ...LONG, max_output_tokens: 40 });
  assert.ok(['completed', 'incomplete'].includes(response.status!), response.status);
  assert.ok(Date.now() - started > 3 * CALLER_LEASE_MS, 'it outlived three leases');
  assert.notEqual((await cluster.store.get(taskIdOf(response.id)))?.status, 'cancelled');
}

before(async () => {
  cluster = await EngineStack.start({ env: { TASKLINE_RECOVERY_INTERVAL_MS: '200' } });
  // 200 ms a token: a generation outlasts several caller leases.
  cluster.startWorker({ TASKLINE_WORKER_MIN_STEP_MS: '200' });
  const env = { TASKLINE_CALLER_LEASE_MS: String(CALLER_LEASE_MS) };
  [a, b, behind] = await Promise.all([
    spawnApi(cluster.redis.url, env),
    spawnApi(cluster.redis.url, env),
    spawnApi(cluster.redis.url, { ...env, ...skewedClock(-10_000) }),
  ]);
});
after(async () => {
  for (const api of [a, b, behind]) {
    api.child.kill('SIGKILL');
    await api.exited;
  }
  await cluster.stop();
});

describe('calls held open by a caller', () => {
  test('the task of a streamed call whose replica is killed is cancelled once its lease lapses', async () => {
    const stream = await sdk(a).responses.create({
      ...LONG,
      input: [{ role: 'user', content: LONG.input }],
      stream: true,
    });
    let responseId: string | undefined;
    try {
      for await (const event of stream) {
        if (event.type === 'response.created') responseId = event.response.id;
        if (event.type === 'response.output_text.delta') a.child.kill('SIGKILL');
      }
    } catch {
      // The replica's connection is cut: what the caller sees of a crash.
    }
    await a.exited;
    assert.ok(responseId, 'the stream began');
    const id = taskIdOf(responseId);
    const ended = await until(
      'the task to end',
      async () => {
        const task = await cluster.store.get(id);
        return task && ['succeeded', 'failed', 'cancelled'].includes(task.status) ? task : undefined;
      },
      60_000,
    );
    assert.equal(ended.status, 'cancelled', 'nobody holds the call: the generation is not run to its end');
  });

  test('a call held longer than several leases is kept: its replica renews it', () => keptThroughLeases(b));

  test('a call held by a replica whose clock is 10 s behind the scheduler is kept', () =>
    // Leases are stamped and judged by Redis's clock: the replica's own is never compared.
    keptThroughLeases(behind));
});
