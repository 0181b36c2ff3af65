/**
 * A zombie worker: a real gpu-worker process stopped (SIGSTOP) past its lease while it streams a
 * task. The task is recovered and finished by another worker; when the zombie resumes (SIGCONT) it
 * must learn it lost the task and write nothing: no event, no change to the record or snapshot.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { after, before, test } from 'node:test';
import { taskKeys } from '@taskline/engine/keys';
import { EngineStack, exited, LONG, until } from '@taskline/test-support/engine-stack';

let cluster: EngineStack;

before(async () => {
  cluster = await EngineStack.start({
    env: {
      TASKLINE_LEASE_MS: '1000',
      TASKLINE_RECOVERY_INTERVAL_MS: '200',
      TASKLINE_WORKER_TIMEOUT_MS: '1000',
    },
  });
});
after(() => cluster.stop());

/** A worker whose log lines the test reads (one JSON object per line). */
function worker(
  id: string,
  env: Record<string, string> = {},
): { child: ChildProcess; logs: Record<string, unknown>[] } {
  const child = cluster.startWorker({ TASKLINE_WORKER_ID: id, TASKLINE_WORKER_MIN_STEP_MS: '20', ...env });
  const logs: Record<string, unknown>[] = [];
  let rest = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const lines = (rest + chunk.toString()).split('\n');
    rest = lines.pop()!;
    for (const line of lines) {
      try {
        logs.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        // not a log line
      }
    }
  });
  return { child, logs };
}

/** Everything the task's keys hold. */
async function state(id: string) {
  const keys = taskKeys(id);
  const redis = cluster.store.redis;
  const [record, events, tokens, inputs] = await Promise.all([
    redis.hgetall(keys.task),
    redis.xrange(keys.events, '-', '+'),
    redis.get(keys.tokens),
    redis.hgetall(keys.inputs),
  ]);
  return { record, events, tokens, inputs };
}

test('SIGSTOP past the lease, recovered and finished elsewhere, SIGCONT: the zombie writes nothing', async () => {
  const zombie = worker('w-zombie');
  const { id } = await cluster.create(LONG, { onRestart: 'retry' });
  await cluster.waitForTokens(id, 10);
  zombie.child.kill('SIGSTOP');
  // The rescuer is never stopped: a 10 s lease, which a starved host does not let lapse mid-run
  // (with 1 s, one would make a third attempt), so its attempt is the task's second and last.
  const rescuer = worker('w-rescuer', { TASKLINE_LEASE_MS: '10000' });
  try {
    const task = await cluster.waitForEnd(id);
    assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
    assert.equal(task.attempt, 2);
    assert.equal(task.leaseOwner, null);
    const before = await state(id);

    zombie.child.kill('SIGCONT');
    // It finds out through its renewal or its next append, and stops the attempt without a commit.
    await until('the zombie to notice it lost the task', () =>
      zombie.logs.some((l) => l.msg === 'attempt_stopping' && l.reason === 'lost' && l.task === id)
        ? true
        : undefined,
    );
    // A drain waits for its jobs to end: every write the zombie had in flight has been answered.
    zombie.child.kill('SIGTERM');
    assert.equal(await exited(zombie.child), 0);
    assert.deepEqual(await state(id), before);
    assert.ok(
      !zombie.logs.some((l) => l.msg === 'attempt_finished' || l.msg === 'handed_back'),
      'the zombie committed an end',
    );
  } finally {
    for (const p of [zombie.child, rescuer.child]) {
      p.kill('SIGCONT');
      p.kill('SIGKILL');
      await exited(p);
    }
  }
});
