import { connectRedis, TaskStore } from '@taskline/engine';
import { forkChild } from './children.js';
import { readEvents, type SseStream } from './http.js';
import { cpuMsOf, hostIdle, startBenchStack, TENANT } from './stack.js';
import { round, sleep, summarize, type Summary } from './stats.js';

export interface FanoutResult {
  streams: number;
  targetEventsPerS: number;
  seconds: number;
  writtenEventsPerS: number;
  appendErrors: number;
  delivered: number;
  missing: number;
  latency: Summary;
  /** Streams whose longest silence exceeded stallMs while events were being written for them. */
  stalledStreams: number;
  stallMs: number;
  maxGapMs: number;
  apiMemory: { idleRssMb: number; withStreamsRssMb: number; peakRssMb: number };
  /** The api's CPU per event it delivered to a stream while the writer ran (µs). */
  apiCpuUsPerEvent: number;
  /** The share of the host's CPU time left idle while the writer ran (%): what "quiet" meant. */
  hostIdlePercent: number;
}

/**
 * Issue item 5: `streams` SSE clients on one api process, a writer process appending deltas at
 * `eventsPerS` in total through the worker's own append script; latency from the append call
 * to the client's read of the event. The same load runs for up to 2 s first, unmeasured: the
 * first second of a fresh writer process (JIT, script loading) stalls it for ~200 ms.
 */
export async function fanout(streams: number, eventsPerS: number, seconds: number): Promise<FanoutResult> {
  const stack = await startBenchStack({ apiOnly: true });
  const redis = connectRedis(stack.redis.url, 'bench-fanout');
  const store = new TaskStore(redis, {
    taskRetentionMs: 3_600_000,
    eventRetentionMs: 3_600_000,
    idempotencyTtlS: 86_400,
    idempotencyPendingMs: 30_000,
  });
  const api = stack.services.find((s) => s.name === 'api')!;
  const open: SseStream[] = [];
  try {
    // Tasks held by a "worker" that is this benchmark: created, claimed and running, no scheduler.
    const tasks: { id: string; attempt: number }[] = [];
    for (let i = 0; i < streams; i += 100) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(100, streams - i) }, async () => {
          const t = await store.create({
            tenant: TENANT,
            kind: 'response',
            model: 'instant',
            onRestart: 'fail',
            request: { model: 'instant', input: 'fan-out' },
          });
          const claimed = await store.claim(t.id, 'bench-writer', 3_600_000);
          await store.start(t.id, claimed.attempt);
          return { id: t.id, attempt: claimed.attempt };
        }),
      );
      tasks.push(...batch);
    }
    const idleRssMb = api.memory().rssMb;

    const latencies: number[] = [];
    const received = new Array<number>(streams).fill(0);
    let deltas = 0;
    const lastAt = new Array<number>(streams).fill(0);
    const maxGap = new Array<number>(streams).fill(0);
    const history = new Array<number>(streams).fill(0);
    for (let i = 0; i < streams; i += 50) {
      for (let j = i; j < Math.min(streams, i + 50); j++) {
        const s = readEvents(stack.apiUrl, tasks[j]!.id, (ev) => {
          if (ev.type !== 'response.output_text.delta') {
            history[j]!++;
            return;
          }
          deltas++;
          const writtenAt = Number((JSON.parse(ev.data) as { delta: string }).delta);
          if (Number.isNaN(writtenAt)) return; // the writer's warm-up
          latencies.push(ev.at - writtenAt);
          received[j]!++;
          if (lastAt[j]) maxGap[j] = Math.max(maxGap[j]!, ev.at - lastAt[j]!);
          lastAt[j] = ev.at;
        });
        s.done.catch(() => undefined);
        open.push(s);
      }
      // Open in waves so the api's accept queue is not what gets measured.
      while (history.slice(i, i + 50).some((h) => h < 3)) await sleep(5);
    }
    const withStreamsRssMb = api.memory().rssMb;

    const writer = await forkChild('./fanout-writer.ts', { BENCH_REDIS_URL: stack.redis.url });
    const cpu0 = cpuMsOf(api.child.pid!);
    const deltas0 = deltas;
    const idle = hostIdle();
    writer.send({ tasks, ratePerS: eventsPerS, seconds, warmupS: Math.min(2, seconds) });
    const done = await writer.next<{ sent: number[]; failed: number; seconds: number }>();
    const hostIdlePercent = idle.percent();
    const apiCpuUsPerEvent = round(
      ((cpuMsOf(api.child.pid!) - cpu0) * 1000) / Math.max(1, deltas - deltas0),
      1,
    );
    await writer.stop();
    // Stragglers: give the api a moment to hand on what Redis already has.
    const want = done.sent.reduce((a, b) => a + b, 0);
    for (let waited = 0; waited < 5000 && received.reduce((a, b) => a + b, 0) < want; waited += 50)
      await sleep(50);
    const delivered = received.reduce((a, b) => a + b, 0);
    const stallMs = 1000;
    const expectedGap = (streams * 1000) / eventsPerS;
    return {
      streams,
      targetEventsPerS: eventsPerS,
      seconds,
      writtenEventsPerS: round(want / done.seconds, 1),
      appendErrors: done.failed,
      delivered,
      missing: want - delivered,
      latency: summarize(latencies),
      stalledStreams: maxGap.filter(
        (g, i) => g > Math.max(stallMs, 5 * expectedGap) || received[i]! < done.sent[i]!,
      ).length,
      stallMs,
      maxGapMs: round(Math.max(...maxGap), 1),
      apiMemory: { idleRssMb, withStreamsRssMb, peakRssMb: api.memory().peakRssMb },
      apiCpuUsPerEvent,
      hostIdlePercent,
    };
  } finally {
    for (const s of open) s.close();
    redis.disconnect();
    await stack.stop();
  }
}
