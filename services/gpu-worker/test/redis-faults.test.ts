// A worker whose Redis connection loses a reply or drops for a moment: writes land once, tasks go on.
import assert from 'node:assert/strict';
import { after, before, test, type TestContext } from 'node:test';
import { scriptSource, type TaskRecord } from '@taskline/engine';
import { bounded, runsScript, startRedisProxy, type RedisProxy, type Service } from '@taskline/testing';
import { EngineStack, deltaText, exited, LONG, outputText, until } from '@taskline/test-support/engine-stack';

let cluster: EngineStack;
let proxy: RedisProxy;
/** The uninterrupted run of LONG: its text and its token snapshot. */
let reference: { text: string; tokens: number[] };

/**
 * Every worker's step floor, the reference's too: at the model's full speed a whole generation can
 * fit in a flush tick or two, and the tokens sent with the end are not in the snapshot.
 */
const STEP = { TASKLINE_WORKER_MIN_STEP_MS: '20' };

/** A worker that reaches Redis only through the proxy; SIGKILLed when the test ends. */
function worker(t: TestContext, id: string): Service {
  const service = cluster.stack.worker({
    REDIS_URL: proxy.url,
    TASKLINE_SCHEDULER_ADDR: cluster.schedulerAddr,
    TASKLINE_WORKER_ID: id,
    TASKLINE_WORKER_MODELS: 'tiny-chat',
    ...STEP,
  });
  t.after(async () => {
    service.child?.kill('SIGKILL');
    if (service.child) await exited(service.child);
  });
  return service;
}

/** The worker's log line `msg` about `task`, once it has written one. */
const logged = (service: Service, task: string, ...msgs: string[]) =>
  until(`worker log ${msgs.join(' or ')} for ${task}`, () =>
    service.logs.find((l) => l.task === task && msgs.includes(l.msg as string)),
  );

/**
 * Its text rebuilt from its deltas (each delta once) matches the reference run, and so do the tokens
 * it stored (the snapshot holds what went out in appends; the tokens sent with the end may or may not
 * be in it, on both runs: compared as far as both go).
 */
async function assertWrittenOnce(task: TaskRecord): Promise<void> {
  assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
  const events = await cluster.events(task.id);
  assert.deepEqual(
    events.map((e) => e.seq),
    events.map((_, i) => i + 1),
  );
  assert.equal(deltaText(events), reference.text);
  assert.equal(outputText(task.result), reference.text);
  const tokens = await cluster.store.snapshot(task.id);
  const common = Math.min(tokens.length, reference.tokens.length);
  assert.ok(common > 0, 'tokens stored');
  assert.deepEqual(tokens.slice(0, common), reference.tokens.slice(0, common));
}

before(async () => {
  cluster = await EngineStack.start({
    env: { TASKLINE_RECOVERY_INTERVAL_MS: '200', TASKLINE_WORKER_TIMEOUT_MS: '1000' },
  });
  proxy = await startRedisProxy(cluster.redis.url);
  const ref = cluster.startWorker({ TASKLINE_WORKER_ID: 'w-reference', ...STEP });
  const { task } = await cluster.run(LONG);
  ref.kill('SIGKILL');
  await exited(ref);
  assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
  reference = { text: outputText(task.result), tokens: await cluster.store.snapshot(task.id) };
  assert.ok(reference.tokens.length >= 50, `the reference run stored only ${reference.tokens.length} tokens`);
});

after(async () => {
  await proxy?.close();
  await cluster?.stop();
});

test('an append whose reply is lost is re-sent and lands once: each delta once, the token snapshot as generated', async (t) => {
  worker(t, 'w-append');
  const lost = proxy.loseReply((c) => runsScript(c, scriptSource('append')), { nth: 3 });
  const { task } = await cluster.run(LONG);
  await bounded('the lost append reply', 5_000, lost);
  await assertWrittenOnce(task);
});

test('a claim whose reply is lost (re-sent by the client, or aborted with its auto-pipeline and made again) is recognised as the same claim: the task runs (on_restart fail)', async (t) => {
  worker(t, 'w-claim');
  const lost = proxy.loseReply((c) => runsScript(c, scriptSource('claim')));
  const { task } = await cluster.run(LONG, { onRestart: 'fail' });
  await bounded('the lost claim reply', 5_000, lost);
  assert.equal(task.attempt, 1);
  await assertWrittenOnce(task);
});

test('a finish whose reply is lost is re-sent and answered as applied: the worker releases the task', async (t) => {
  const service = worker(t, 'w-finish');
  // transition.lua's ARGV[2] (the target status) follows the command, the SHA, the key count and 5 keys.
  const lost = proxy.loseReply((c) => runsScript(c, scriptSource('transition')) && c[9] === 'succeeded');
  const { task } = await cluster.run(LONG);
  await bounded('the lost finish reply', 5_000, lost);
  await assertWrittenOnce(task);
  const line = await logged(service, task.id, 'attempt_finished', 'attempt_lost', 'commit_failed');
  assert.equal(line.msg, 'attempt_finished', JSON.stringify(line));
  // Released by the worker, not by a sweep: its tenant's running set no longer holds it.
  assert.equal(await cluster.store.redis.zscore(`tl:{sched}:active:${task.tenant}`, task.id), null);
});

test('a 150 ms Redis outage mid-generation is waited out (or a lost attempt under on_restart), never a failure: the task succeeds', async (t) => {
  worker(t, 'w-blip');
  const created = await cluster.create(LONG, { onRestart: 'retry' });
  await cluster.waitForTokens(created.id, 5);
  await proxy.outage(150);
  const task = await cluster.waitForEnd(created.id);
  assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
  assert.equal(outputText(task.result), reference.text);
});
