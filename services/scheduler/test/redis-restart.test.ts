import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { createInterface } from 'node:readline';
import { freePort } from '@taskline/testing';
import { EngineStack, until } from '@taskline/test-support/engine-stack';

// Redis going away is an outage to ride out, not a reason to die: every loop, the wake-up
// subscriber and the BullMQ queues see their commands fail while it is down, and a process that
// let one of those failures go unhandled would exit and dispatch nothing once Redis is back.
let cluster: EngineStack | undefined;
after(() => cluster?.stop());

test('a scheduler stays up through Redis kills and dispatches again once Redis is back', async () => {
  cluster = await EngineStack.start({ env: { TASKLINE_RECOVERY_INTERVAL_MS: '100' } });
  const [scheduler] = [...cluster.schedulers.values()];
  cluster.startWorker({ TASKLINE_WORKER_MODELS: 'instant' });
  const first = await cluster.run({ input: 'before' }, { model: 'instant' });
  assert.equal(first.task.status, 'succeeded');

  // The test's own connection answers "try again" while it reconnects (a Redis Cluster client
  // refuses commands at once then, as a client would be told 503): it retries, as clients do.
  const created = (input: string) =>
    until(`a create of ${input} accepted`, () =>
      cluster!.create({ input }, { model: 'instant' }).then(
        (task) => task,
        () => undefined,
      ),
    );
  for (let i = 0; i < 5; i++) {
    // Killed while tasks wait, so the dispatch and the sweeps have work whose commands fail.
    await created(`round ${i}`);
    await cluster.redis.kill();
    // Long enough for every loop and every connection's retries to give up at least once.
    await sleep(2000);
    await cluster.redis.restart();
    assert.equal(scheduler!.exitCode, null, `the scheduler exited after Redis restart ${i + 1}`);
    assert.equal(scheduler!.signalCode, null);
  }

  // A bound that catches a hang, not a pace: after five kills of a six-node cluster, a worker's
  // reconnects back off for long, and the parallel pass of `pnpm test:cluster` saw over 60 s.
  const id = (await created('after')).id;
  const after = await cluster.waitForEnd(id, 180_000).catch(async (err: unknown) => {
    // What a hang leaves to go on: where the task stands and what each service said last.
    const record = await cluster!.store.get(id).catch((e: unknown) => String(e));
    const last = (s: { logs: Record<string, unknown>[] }) => s.logs.slice(-15).map((l) => JSON.stringify(l));
    console.error(
      JSON.stringify({ record }),
      [...cluster!.stack.schedulers, ...cluster!.stack.workers].flatMap(last).join('\n'),
    );
    throw err;
  });
  assert.equal(after.status, 'succeeded');
  assert.equal(scheduler!.exitCode, null, 'the scheduler exited');
});

test('a scheduler started while Redis is down waits for it, then dispatches', async () => {
  await cluster?.stop();
  cluster = await EngineStack.start({ schedulers: 0 });
  await cluster.redis.kill();
  // A service restarted during an outage (a crash, a rolling update) must not crash-loop on it.
  cluster.restartScheduler(await freePort());
  const [scheduler] = [...cluster.schedulers.values()];
  const logs: string[] = [];
  createInterface({ input: scheduler!.stdout! }).on('line', (line) => logs.push(line));
  // Everything it says about the outage is a JSON log line: nothing on stderr from a connection
  // nobody listens to (ioredis prints an "Unhandled error event" and its stack there).
  const stderr: string[] = [];
  createInterface({ input: scheduler!.stderr! }).on('line', (line) => stderr.push(line));
  const outcome = await until('the scheduler to wait for Redis or exit', () =>
    scheduler!.exitCode !== null
      ? `exited with ${scheduler!.exitCode}`
      : logs.some((l) => l.includes('"msg":"redis_unavailable"'))
        ? 'waiting'
        : undefined,
  );
  assert.equal(outcome, 'waiting');
  await cluster.redis.restart();
  cluster.startWorker({ TASKLINE_WORKER_MODELS: 'instant' });
  const { task } = await cluster.run({ input: 'late' }, { model: 'instant' });
  assert.equal(task.status, 'succeeded');
  assert.equal(scheduler!.exitCode, null, 'the scheduler exited');
  assert.deepEqual(
    stderr.filter((l) => l.includes('Unhandled error event')),
    [],
  );
});
