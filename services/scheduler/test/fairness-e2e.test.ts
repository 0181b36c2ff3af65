/**
 * Fair share end to end: a real Redis, a real scheduler process and a real gpu-worker process
 * (the `instant` benchmark model, so 10,000 tasks are cheap to create and quick to run).
 * fairness.test.ts checks dispatch.lua on its own; this checks what the running system does.
 *
 * Order, not time: a MONITOR connection sees every command Redis runs, in the order it runs
 * them, including those inside Lua scripts. So the test reads exactly when B's task became ready
 * (the enqueue's ZADD to `ready:instant:b`), when each tenant's tasks were taken (dispatch.lua's
 * ZPOPMIN of `ready:instant:<tenant>`, one per turn, in pick order), when each task was placed in
 * its tenant's running set (dispatch.lua's ZADD to `active:<tenant>`), handed to BullMQ (the job's
 * LPUSH to the model queue's wait list), claimed by the worker (claim.lua's HSET status loading)
 * and ended (the terminal script's HSET ended_at).
 *
 * Turns are read from the pops, not the running-set ZADDs: one round writes each tenant's places
 * in one ZADD after all its picks, in Lua's table order, so a round that served A, then B, then A
 * again may write A's three places before B's.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { modelQueueName, queuePrefix } from '@taskline/control';
import { schedulerKeys } from '@taskline/engine/keys';
import { monitorRedis, type RedisMonitor } from '@taskline/testing';
import { EngineStack, until } from '@taskline/test-support/engine-stack';

const MODEL = 'instant';
const WAIT_LIST = `${queuePrefix(MODEL)}:${modelQueueName(MODEL)}:wait`;
const ACTIVE_PREFIX = schedulerKeys.active('');
const READY_PREFIX = schedulerKeys.ready('', MODEL);
const TASK_KEY = /^tl:\{(task_[^}]+)\}:task$/;

type Step = 'ready' | 'popped' | 'picked' | 'queued' | 'claimed' | 'ended' | 'released';
interface Mark {
  step: Step;
  /** A task id; for `popped`, the tenant (one mark per task taken). */
  id: string;
}

/** The members a `ZADD key [options] score member ...` adds. */
const zaddMembers = (args: string[]): string[] => {
  let i = 2;
  while (/^(NX|XX|GT|LT|CH)$/i.test(args[i] ?? '')) i++;
  return args.slice(i).filter((_, j) => j % 2 === 1);
};

/** Every scheduling step of every task, in the order Redis ran it. */
class Recorder {
  readonly marks: Mark[] = [];
  private monitor!: RedisMonitor;

  static async start(redisUrl: string): Promise<Recorder> {
    const rec = new Recorder();
    rec.monitor = monitorRedis(redisUrl, (args) => rec.see(args));
    await rec.monitor.ready;
    return rec;
  }

  private see(args: string[]): void {
    const [cmd, key] = [args[0]?.toLowerCase(), args[1] ?? ''];
    const add = (step: Step, id: string | undefined) => id && this.marks.push({ step, id });
    // A round's picks and a turn's ends touch a running set once for several tasks.
    if (cmd === 'zadd' && key.startsWith(ACTIVE_PREFIX)) zaddMembers(args).forEach((id) => add('picked', id));
    else if (cmd === 'zrem' && key.startsWith(ACTIVE_PREFIX))
      args.slice(2).forEach((id) => add('released', id));
    else if (cmd === 'zadd' && key.startsWith(READY_PREFIX)) add('ready', args.at(-1));
    else if (cmd === 'zpopmin' && key.startsWith(READY_PREFIX)) {
      const tenant = key.slice(READY_PREFIX.length);
      for (let n = Number(args[2] ?? 1); n > 0; n--) add('popped', tenant);
    } else if (cmd === 'lpush' && key === WAIT_LIST) add('queued', args[2]?.replace(/-\d+-\d+$/, ''));
    else if (cmd === 'hset' && TASK_KEY.test(key)) {
      // Each script writes the record in one HSET, its fields in any order: a claim sets the lease
      // owner, an end the end stamp.
      const id = TASK_KEY.exec(key)![1];
      const fields = args.filter((_, i) => i >= 2 && i % 2 === 0);
      if (fields.includes('lease_owner')) add('claimed', id);
      else if (fields.includes('ended_at')) add('ended', id);
    }
  }

  count(step: Step, ids: Set<string>): number {
    return this.marks.filter((m) => m.step === step && ids.has(m.id)).length;
  }

  /** Index of the first mark of `step` for `id` (at or after `from`), or -1. */
  find(step: Step, id: string, from = 0): number {
    return this.marks.findIndex((m, i) => i >= from && m.step === step && m.id === id);
  }

  /** The most tasks of `ids` between `start` and `end` marks at any one point. */
  peak(ids: Set<string>, start: Step, end: Step): number {
    const open = new Set<string>();
    let peak = 0;
    for (const m of this.marks) {
      if (!ids.has(m.id)) continue;
      if (m.step === start) open.add(m.id);
      else if (m.step === end) open.delete(m.id);
      peak = Math.max(peak, open.size);
    }
    return peak;
  }

  stop(): void {
    this.monitor.stop();
  }
}

/** `count` tasks for `tenant` through the real TaskStore.create, a few hundred in flight at once. */
async function backlog(cluster: EngineStack, tenant: string, count: number): Promise<Set<string>> {
  const ids = new Set<string>();
  const create = () =>
    cluster.store.create({
      tenant,
      kind: 'response',
      model: MODEL,
      onRestart: 'fail',
      request: { model: MODEL, input: 'x', max_output_tokens: 4 },
    });
  for (let done = 0; done < count;) {
    const batch = Math.min(500, count - done);
    for (const task of await Promise.all(Array.from({ length: batch }, create))) ids.add(task.id);
    done += batch;
  }
  return ids;
}

const clusters: EngineStack[] = [];
after(async () => {
  for (const c of clusters) await c.stop();
});

test('a tenant with 10,000 queued tasks delays another tenant by at most one round, within its cap', async () => {
  const cap = 3;
  const weightA = 2;
  const quantum = 1;
  const share = quantum * weightA;
  const cluster = await EngineStack.start({
    env: {
      TASKLINE_TENANT_MAX_RUNNING: String(cap),
      TASKLINE_TENANT_WEIGHTS: `a:${weightA}`,
      TASKLINE_DISPATCH_QUANTUM: String(quantum),
    },
  });
  clusters.push(cluster);
  const redis = cluster.store.redis;
  // No worker yet, so no capacity: the whole backlog waits in the ready index.
  const a = await backlog(cluster, 'a', 10_000);
  assert.equal(await redis.zcard(schedulerKeys.ready('a', MODEL)), 10_000);

  const rec = await Recorder.start(cluster.redis.url);
  // More slots than the cap: only the cap can hold A back. Each task lasts a few steps of 5 ms,
  // so that A's tasks overlap and reach the cap whatever the speed of dispatch.
  cluster.startWorker({
    TASKLINE_WORKER_MODELS: MODEL,
    TASKLINE_WORKER_SLOTS: String(2 * cap),
    TASKLINE_WORKER_MIN_STEP_MS: '5',
  });
  await until('A to finish 30 tasks', () => (rec.count('ended', a) >= 30 ? true : undefined));

  const b = await cluster.store.create({
    tenant: 'b',
    kind: 'response',
    model: MODEL,
    onRestart: 'fail',
    request: { model: MODEL, input: 'x', max_output_tokens: 4 },
  });
  const done = await cluster.waitForEnd(b.id);
  assert.equal(done.status, 'succeeded');
  const aQueued = await redis.zcard(schedulerKeys.ready('a', MODEL));
  const endedBefore = rec.count('ended', a);
  await until('A to finish 30 more tasks', () =>
    rec.count('ended', a) >= endedBefore + 30 ? true : undefined,
  );
  rec.stop();

  const ready = rec.find('ready', b.id);
  assert.ok(ready >= 0, 'B was never seen becoming ready');
  // A tasks that reached `step` after B became ready and before B did; with `late`, only those
  // A picked after B became ready (the others were dispatched before B was there to compete).
  const ahead = (step: Step, late: boolean) => {
    const at = rec.find(step, b.id, ready);
    assert.ok(at > ready, `B was never ${step}`);
    return rec.marks
      .slice(ready, at)
      .filter((m) => m.step === step && a.has(m.id) && (!late || rec.find('picked', m.id) > ready)).length;
  };
  // A's tasks taken in the turns served after B became ready and before B's turn.
  const bTurn = rec.find('popped', 'b', ready);
  assert.ok(bTurn > ready, 'B was never taken');
  const numbers = {
    picked: rec.marks.slice(ready, bTurn).filter((m) => m.step === 'popped' && m.id === 'a').length,
    queued: ahead('queued', false),
    queuedPickedLate: ahead('queued', true),
    claimed: ahead('claimed', false),
    claimedPickedLate: ahead('claimed', true),
    aQueuedWhenBEnded: aQueued,
    peakDispatched: rec.peak(a, 'picked', 'released'),
    peakRunning: rec.peak(a, 'claimed', 'ended'),
  };
  console.log('fairness e2e: A tasks after B became ready, before B', numbers);
  assert.ok(numbers.picked <= share, `B waited for ${numbers.picked} A picks (one round gives A ${share})`);
  assert.ok(
    numbers.queuedPickedLate <= share,
    `${numbers.queuedPickedLate} A jobs went to BullMQ before B's`,
  );
  assert.ok(numbers.claimedPickedLate <= share, `${numbers.claimedPickedLate} A tasks were claimed before B`);
  assert.ok(aQueued > 9_000, `B ended only once A's backlog was down to ${aQueued}`);
  assert.ok(numbers.peakDispatched <= cap, `A had ${numbers.peakDispatched} dispatched at once (cap ${cap})`);
  assert.ok(numbers.peakRunning <= cap, `A ran ${numbers.peakRunning} tasks at once (cap ${cap})`);
  // The cap was reached, so the run did test it.
  assert.equal(numbers.peakRunning, cap);
});

test('weights give a tenant that share of the dispatches', async () => {
  const weightA = 3;
  const cluster = await EngineStack.start({ env: { TASKLINE_TENANT_WEIGHTS: `a:${weightA}` } });
  clusters.push(cluster);
  const a = await backlog(cluster, 'a', 300);
  const b = await backlog(cluster, 'b', 300);
  const rec = await Recorder.start(cluster.redis.url);
  // Fewer slots than the cap (64): capacity, not the cap, limits both tenants.
  cluster.startWorker({ TASKLINE_WORKER_MODELS: MODEL, TASKLINE_WORKER_SLOTS: '2' });
  await until('80 tasks to end', () =>
    rec.count('ended', a) + rec.count('ended', b) >= 80 ? true : undefined,
  );
  rec.stop();
  const order = rec.marks.filter((m) => m.step === 'queued').map((m) => (a.has(m.id) ? 'a' : 'b'));
  const first = order.slice(0, 80);
  const ratio = first.filter((t) => t === 'a').length / first.filter((t) => t === 'b').length;
  console.log('weights e2e: dispatch order', first.join(''), { ratio });
  assert.ok(
    ratio >= weightA - 0.5 && ratio <= weightA + 0.5,
    `A got ${ratio} times B's dispatches, not ${weightA}`,
  );
  // And B never waits longer than one round: at most A's share between two of B's dispatches.
  const longest = Math.max(
    ...first
      .join('')
      .split('b')
      .map((run) => run.length),
  );
  assert.ok(longest <= weightA, `A got ${longest} dispatches in a row`);
});
