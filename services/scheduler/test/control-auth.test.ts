/**
 * The control plane with real processes: a worker without the credential is refused, a second
 * worker under a live worker's id is refused, and both refused workers exit saying why.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startServices, until, type Service, type Stack } from '@taskline/testing';

let stack: Stack;
before(async () => {
  stack = await startServices({ workerEnv: { TASKLINE_WORKER_MODELS: 'instant' } });
});
after(() => stack.stop());

/**
 * Starts a worker expected to be refused: it may log `ready` before the scheduler answers, so the
 * exit is awaited, not `up`. Resolves with its exit code and its stderr.
 */
async function refusedWorker(env: Record<string, string>, name: string) {
  const worker = stack.worker(env, { name });
  worker.up.catch(() => undefined);
  let stderr = '';
  worker.child!.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await worker.exited;
  return { code, stderr };
}

async function readyz(worker: Service): Promise<number> {
  return (await fetch(`http://127.0.0.1:${String(worker.readyLine!.metrics_port)}/readyz`)).status;
}

test('a worker with a token the scheduler does not accept is refused and exits 1 saying so', async () => {
  const { code, stderr } = await refusedWorker(
    { TASKLINE_CONTROL_TOKEN: 'not-the-schedulers-token-0123456789abcdef' },
    'w-bad',
  );
  assert.equal(code, 1);
  assert.match(stderr, /token missing or not accepted.*"msg":"control_refused"/);
  // The scheduler's log lines go out once per turn of its loop: maybe after the worker's exit.
  await until(
    'the scheduler to log the refusal',
    async () => stack.schedulers[0]!.logs.some((l) => l.msg === 'worker_unauthenticated') || undefined,
  );
});

test('a worker with no credential at all refuses to start', async () => {
  const { code, stderr } = await refusedWorker({ TASKLINE_CONTROL_TOKEN: '' }, 'w-none');
  assert.equal(code, 1);
  assert.match(stderr, /set TASKLINE_CONTROL_TOKEN.*"msg":"start_failed"/);
});

test('a second worker under the id of a live one is refused; the first stays registered', async () => {
  const first = stack.worker({ TASKLINE_WORKER_ID: 'w-same' }, { name: 'w-first' });
  await first.up;
  for (const end = Date.now() + 10_000; (await readyz(first)) !== 200;)
    if (Date.now() > end) assert.fail('the first worker never became ready (registered)');
  const { code, stderr } = await refusedWorker({ TASKLINE_WORKER_ID: 'w-same' }, 'w-second');
  assert.equal(code, 1);
  assert.match(stderr, /worker id w-same is registered by a live worker/);
  await until(
    'the scheduler to log the id taken',
    async () =>
      stack.schedulers[0]!.logs.some((l) => l.msg === 'worker_id_taken' && l.worker === 'w-same') ||
      undefined,
  );
  assert.equal(await readyz(first), 200, 'the first worker is still registered');
  assert.ok(first.running, 'first.running');
});
