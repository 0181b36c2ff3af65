/**
 * The writing side of the fan-out benchmark, in its own process as a worker is: appends one
 * `response.output_text.delta` per call through TaskStore.append (the worker's own script path),
 * round robin over the tasks at a fixed total rate. Each delta's text is the epoch time (ms,
 * sub-ms resolution) at which the append was issued, so readers measure write-to-read latency.
 */
import { connectRedis, TaskStore } from '@taskline/engine';

interface Go {
  tasks: { id: string; attempt: number }[];
  ratePerS: number;
  seconds: number;
  /** Seconds of the same load first, not measured: JIT, script loading and connection buffers settle. */
  warmupS: number;
}

const redis = connectRedis(process.env.BENCH_REDIS_URL!, 'bench-fanout-writer');
const store = new TaskStore(redis, {
  taskRetentionMs: 3_600_000,
  eventRetentionMs: 3_600_000,
  idempotencyTtlS: 86_400,
  idempotencyPendingMs: 30_000,
});
const now = () => performance.timeOrigin + performance.now();

process.on('message', (go: Go) => void run(go));
process.send!({ ready: true });

async function run({ tasks, ratePerS, seconds, warmupS }: Go): Promise<void> {
  // Warm-up deltas carry no timestamp: readers skip them.
  await load(tasks, ratePerS, warmupS, () => 'warmup');
  const sent = new Array<number>(tasks.length).fill(0);
  const started = now();
  const failed = await load(
    tasks,
    ratePerS,
    seconds,
    () => String(now()),
    (i) => void sent[i]!++,
  );
  const elapsed = (now() - started) / 1000;
  process.send!({ sent, failed, seconds: elapsed });
  redis.disconnect();
}

/** Appends `text()` deltas round robin over the tasks at `ratePerS` for `seconds`; returns the failures. */
async function load(
  tasks: Go['tasks'],
  ratePerS: number,
  seconds: number,
  text: () => string,
  onSent: (task: number) => void = () => undefined,
): Promise<number> {
  // As even as Node's timers allow (20 appends every 2 ms at 10,000/s), as the writes of many
  // independent workers would be; 10 ms ticks made bursts of 100 that queued behind each other.
  const tickMs = 2;
  const perTick = (ratePerS * tickMs) / 1000;
  const started = now();
  let issued = 0;
  let failed = 0;
  let next = 0;
  const inflight = new Set<Promise<void>>();
  while (now() - started < seconds * 1000) {
    const due = Math.floor(((now() - started) / tickMs + 1) * perTick);
    while (issued < due) {
      const i = next;
      next = (next + 1) % tasks.length;
      const t = tasks[i]!;
      issued++;
      const p = store
        .append(
          t.id,
          t.attempt,
          [],
          [
            {
              type: 'response.output_text.delta',
              data: {
                task_status: 'running',
                item_id: 'msg',
                output_index: 0,
                content_index: 0,
                delta: text(),
              },
            },
          ],
        )
        .then(
          () => onSent(i),
          () => void failed++,
        )
        .finally(() => inflight.delete(p));
      inflight.add(p);
    }
    await new Promise((r) => setTimeout(r, tickMs / 2));
  }
  await Promise.all(inflight);
  return failed;
}
