/**
 * The raw-BullMQ side of the lifecycle benchmark, in its own process like the gpu-worker: a
 * Worker with a no-op processor. The parent asks `{ waitFor: n }` and gets `{ completed, lastAt }`
 * once n jobs have completed since start.
 */
import { Worker } from 'bullmq';

const url = process.env.BENCH_REDIS_URL!;
const queue = process.env.BENCH_QUEUE!;
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 64);

let completed = 0;
let lastAt = 0;
const waiters: { n: number }[] = [];
const worker = new Worker(queue, async () => undefined, {
  connection: { url, maxRetriesPerRequest: null } as never,
  concurrency,
  removeOnComplete: { count: 0 },
  removeOnFail: { count: 0 },
});
worker.on('completed', () => {
  completed++;
  lastAt = performance.timeOrigin + performance.now();
  for (const w of [...waiters]) {
    if (completed >= w.n) {
      waiters.splice(waiters.indexOf(w), 1);
      process.send!({ completed, lastAt });
    }
  }
});
await worker.waitUntilReady();
process.on('message', (m: { waitFor?: number; stop?: boolean }) => {
  if (m.stop) void worker.close().then(() => process.exit(0));
  else if (m.waitFor !== undefined) {
    if (completed >= m.waitFor) process.send!({ completed, lastAt });
    else waiters.push({ n: m.waitFor });
  }
});
process.send!({ ready: true });
