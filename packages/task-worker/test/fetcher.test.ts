/**
 * A fetcher starts each job as soon as it has taken it. BullMQ 6's own loop, at a concurrency
 * above one, first asks Redis for another job once it has run one (a round trip on every later
 * job's way to its processor: in every task's time to first token), and takes every job queued
 * (up to its concurrency, one durable write after another) before it starts the first. A fetch it
 * answers without Redis must never be the one after a wait for jobs: the job that ended the wait
 * would stay queued until the fetcher's next idle poll.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Queue, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { connectQueueRedis } from '@taskline/engine';
import { startRedis, until, type RedisServer } from '@taskline/testing';
import { Fetcher } from '../src/fetcher.js';

let redis: RedisServer;
const connections: Redis[] = [];
const connect = () => {
  const c = connectQueueRedis(redis.url, 'fetcher-test');
  connections.push(c);
  return c;
};

before(async () => {
  redis = await startRedis();
});
after(async () => {
  for (const c of connections) c.disconnect();
  await redis.stop();
});

/** A queue and a fetcher of `concurrency` on it whose processor runs `onJob`; closed after the test. */
function pair(name: string, concurrency: number, onJob: (job: Job) => Promise<void>, autorun = true) {
  const prefix = `{${name}}`; // one hash slot, so the queue also works on a Redis Cluster
  const queue = new Queue(name, { connection: connect() as never, prefix });
  // An idle fetcher asks Redis again every `drainDelay` s: a job it missed would wait that long.
  const fetcher = new Fetcher(name, onJob, {
    connection: connect() as never,
    prefix,
    concurrency,
    autorun,
    drainDelay: 300,
  });
  return { queue, fetcher, close: () => Promise.all([fetcher.close(), queue.close()]) };
}

for (const concurrency of [1, 4])
  test(`a job added to an idle fetcher of ${concurrency} starts at once, before the fetcher asks Redis for another`, async () => {
    // BullMQ says `drained` once a fetch finds the queue empty, and not again until it has taken a
    // job: one after a job's add and before its start is a fetch that job waited for.
    let drained = 0;
    let atAdd = 0;
    let atStart = 0;
    const seen: number[] = [];
    const { queue, fetcher, close } = pair(`lone${concurrency}`, concurrency, async () => {
      seen.push(drained - atAdd);
      atStart = drained;
    });
    fetcher.on('drained', () => void drained++);
    try {
      // One job at a time, each once the fetcher has found the queue empty again: how BullMQ's loop
      // waits then depends on what it did last, so several jobs meet the states it leaves itself in.
      for (let n = 1; n <= 5; n++) {
        await until('the fetcher to find the queue empty', async () =>
          drained > atStart ? true : undefined,
        );
        atAdd = drained;
        await queue.add('job', {});
        await until(`job ${n} to start`, async () => (seen.length === n ? true : undefined), 20_000);
        assert.equal(seen[n - 1], 0, `job ${n} started only after a fetch that found the queue empty`);
      }
    } finally {
      await close();
    }
  });

for (const concurrency of [1, 4])
  test(`a job added as a fetcher of ${concurrency} finds the queue empty is taken at once, not at its next idle poll`, async () => {
    // The add goes out from the 'drained' listener, before the fetcher's next fetch: that fetch
    // must ask Redis. One answered 'none' unasked would leave the job queued, its wake-up consumed,
    // until the idle fetcher polls again (`drainDelay`, 300 s here).
    let ran = 0;
    let adds = 0;
    const { queue, fetcher, close } = pair(`idle${concurrency}`, concurrency, async () => void ran++);
    fetcher.on('drained', () => {
      if (adds < 5) void queue.add('job', { n: ++adds });
    });
    try {
      await until(
        'five jobs, each added as the fetcher went idle, to run',
        async () => (ran === 5 ? true : undefined),
        20_000,
      );
    } finally {
      await close();
    }
  });

test('of several jobs queued at once, the first starts before the rest are taken', async () => {
  let waitingAtFirst: number | undefined;
  let ran = 0;
  const { queue, fetcher, close } = pair(
    'burst',
    8,
    async () => {
      if (ran++ === 0) waitingAtFirst = await queue.getWaitingCount();
    },
    false,
  );
  try {
    await queue.addBulk(Array.from({ length: 8 }, () => ({ name: 'job', data: {} })));
    void fetcher.run();
    await until('every job ran', async () => (ran === 8 ? true : undefined));
    assert.ok(waitingAtFirst! > 0, `the first job started with ${waitingAtFirst} of 8 still queued`);
    // Having found the queue empty, it waits for jobs again: a later one runs.
    await queue.add('job', {});
    await until('a later job ran', async () => (ran === 9 ? true : undefined));
  } finally {
    await close();
  }
});
