/**
 * `pnpm bench`: Taskline against the layers beneath it, each pair side by side in one run on one
 * Redis (AOF, appendfsync always). Writes bench/results/latest.{json,md,svg}.
 * `pnpm bench:smoke`: the same harness at toy sizes, into a temporary folder; checks that every
 * benchmark runs and the report is well-formed, never speed.
 */
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { connectRedis } from '@taskline/engine';
import { loadOnnxModel } from '@taskline/inference';
import { fanout, type FanoutResult } from './fanout.js';
import { agent } from './http.js';
import {
  batching,
  follow,
  longest,
  same,
  streaming,
  ttft,
  type BatchingResult,
  type StreamingResult,
  type TtftResult,
} from './model.js';
import {
  acceptance,
  idleRate,
  INSTANT,
  lifecycle,
  startRawBullmq,
  type AcceptanceResult,
  type LifecycleResult,
} from './queue.js';
import { roundTrips } from './redis-cost.js';
import { clusterLifecycle, type ClusterLifecycleResult } from './cluster.js';
import { toMarkdown, toSvg, validateReport, type Report } from './report.js';
import { sameWork, startPeer, type PeerResult } from './peer.js';
import { sections } from './sections.js';
import { BENCH_ENV, memoryOf, ROOT, startBenchStack, type Procs } from './stack.js';
import { createMany, waitEnded } from './taskline.js';
import { toolDispatch, type ToolDispatchResult } from './tool-dispatch.js';
import { pathTimeline, type PathTimeline } from './timeline.js';

const { values: args } = parseArgs({
  // pnpm passes on the `--` that npm needs (`pnpm bench -- --only 1`): both spellings work.
  args: process.argv.slice(2).filter((arg, i) => !(i === 0 && arg === '--')),
  options: {
    smoke: { type: 'boolean', default: false },
    out: { type: 'string' },
    /** Comma-separated item numbers to run (1-10); default all (smoke: all but 8, which starts six Redis nodes). */
    only: { type: 'string' },
    /** KEY=VALUE settings over BENCH_ENV for every service, e.g. --env TASKLINE_DISPATCH_INTERVAL_MS=5. */
    env: { type: 'string', multiple: true },
  },
});
const smoke = args.smoke!;
const overrides = Object.fromEntries(
  (args.env ?? []).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
);
Object.assign(BENCH_ENV, overrides);
const only = new Set(
  (args.only ?? (smoke ? '1,2,3,4,5,6,7,9,10' : '1,2,3,4,5,6,7,8,9,10')).split(',').map(Number),
);
const SIZES = smoke
  ? {
      tasks: 40,
      inflight: 8,
      acceptRate: 50,
      acceptS: 1,
      ttftRate: 10,
      ttftS: 1,
      streamRuns: 1,
      batchRounds: 1,
      batchTokens: 16,
      streams: 20,
      eventsPerS: 200,
      fanoutS: 1,
      idleMs: 500,
      roundTrips: 10,
      peerRate: 5,
      peerS: 1,
      peerTokens: 16,
      toolCalls: 10,
    }
  : {
      tasks: 2000,
      inflight: 64,
      acceptRate: 200,
      acceptS: 20,
      ttftRate: 20,
      ttftS: 20,
      streamRuns: 15,
      batchRounds: 16,
      batchTokens: 128,
      streams: 2000,
      eventsPerS: 10000,
      fanoutS: 10,
      idleMs: 3000,
      roundTrips: 100,
      peerRate: 10,
      peerS: 10,
      peerTokens: 64,
      toolCalls: 300,
    };
const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);

const results: Record<string, unknown> = { sizes: SIZES };
let life: LifecycleResult | undefined;
let accept: AcceptanceResult | undefined;
let first: TtftResult | undefined;
let stream: StreamingResult | undefined;
let batch: BatchingResult | undefined;
let fan: FanoutResult | undefined;
let peerResult: PeerResult | undefined;
let tool: ToolDispatchResult | undefined;
let background = new Map<string, number>();
let path: { instant: PathTimeline; chat: PathTimeline } | undefined;
let redisVersion = '';

const stack = await startBenchStack();
const redis = connectRedis(stack.redis.url, 'bench');
const raw = await startRawBullmq(stack.redis.url, Number(BENCH_ENV.TASKLINE_WORKER_SLOTS));
/** Every process on each side's path, for the CPU each spends per task. */
const procs: { taskline: Procs; bullmq: Procs } = {
  taskline: {
    ...Object.fromEntries(stack.services.map((s) => [s.name, s.child.pid!])),
    redis: stack.redis.pid,
    'benchmark client': 'self',
  },
  bullmq: { redis: stack.redis.pid, 'BullMQ worker': raw.worker.proc.pid!, 'benchmark client': 'self' },
};
/** Item 9: the same-work peer's processes on this run's Redis, measured against Taskline. */
async function samePeer(long: { seed: number; maxOutputTokens: number }): Promise<PeerResult> {
  log(
    `9 same-work peer: tiny-chat at ${SIZES.peerRate}/s for ${SIZES.peerS} s, 1 and ${SIZES.peerTokens} tokens, each side`,
  );
  const peer = await startPeer(stack.redis.url);
  try {
    const peerProcs: Procs = {
      'peer server': peer.server.proc.pid!,
      'peer worker': peer.worker.proc.pid!,
      redis: stack.redis.pid,
      'benchmark client': 'self',
    };
    const sides = { taskline: procs.taskline, peer: peerProcs };
    const result = await sameWork(redis, stack.apiUrl, peer, sides, background, SIZES, long);
    results.peer = result;
    return result;
  } finally {
    await peer.close();
  }
}
try {
  redisVersion = /redis_version:(\S+)/.exec(await redis.info('server'))?.[1] ?? '';
  log('warming up: instant tasks, raw jobs, the tiny-chat model in the worker');
  await waitEnded(redis, await createMany(stack.apiUrl, 20, 8, INSTANT));
  await raw.addAll(20, 8);
  await raw.drained();
  await follow(stack.apiUrl, same({ maxOutputTokens: 8, temperature: 0, seed: 1 }).lmsp);
  results.redisRoundTrip = await roundTrips(redis, SIZES.roundTrips);
  if (only.has(7)) {
    log('7 timeline: one instant and one tiny-chat task under MONITOR');
    path = {
      instant: await pathTimeline(redis, stack.apiUrl, INSTANT(0).model),
      chat: await pathTimeline(redis, stack.apiUrl, 'tiny-chat'),
    };
    results.timeline = path;
  }
  background = await idleRate(redis, SIZES.idleMs);

  if (only.has(1) || only.has(7)) {
    log(`1/7 lifecycle: ${SIZES.tasks} tasks, ${SIZES.inflight} creates in flight`);
    life = await lifecycle(stack.apiUrl, redis, raw, procs, background, SIZES.tasks, SIZES.inflight);
    results.lifecycle = life;
  }
  if (only.has(2)) {
    log(`2 acceptance: ${SIZES.acceptRate}/s for ${SIZES.acceptS} s, each side`);
    accept = await acceptance(stack.apiUrl, redis, raw, procs, SIZES.acceptRate, SIZES.acceptS);
    results.acceptance = accept;
  }
  if (only.has(3) || only.has(4) || only.has(6) || only.has(9)) {
    // Same model folder, onnxruntime settings and thread count as the worker's.
    const model = await loadOnnxModel(join(ROOT, 'models/tiny-chat'), {
      id: 'tiny-chat',
      intraOpThreads: Number(BENCH_ENV.TASKLINE_INTRA_OP_THREADS) || undefined,
      ...(BENCH_ENV.TASKLINE_PREFILL_CHUNK_TOKENS && {
        prefillChunkTokens: Number(BENCH_ENV.TASKLINE_PREFILL_CHUNK_TOKENS),
      }),
      // bench/gpu-check.sh: the bare side runs on the worker's execution provider too.
      ...(BENCH_ENV.TASKLINE_EXECUTION_PROVIDER === 'cuda' && {
        executionProviders: ['cuda', 'cpu'] as const,
      }),
    });
    try {
      await model.generate(same({ maxOutputTokens: 8, temperature: 0, seed: 1 }).bare);
      if (only.has(3)) {
        log(`3 time to first token: ${SIZES.ttftRate}/s for ${SIZES.ttftS} s, each side`);
        first = await ttft(stack.apiUrl, model, SIZES.ttftRate, SIZES.ttftS);
        results.ttft = first;
      }
      if (only.has(4)) {
        log('4 streaming: one long generation');
        stream = await streaming(stack.apiUrl, model, SIZES.streamRuns);
        results.streaming = stream;
      }
      if (only.has(6)) {
        log('6 batching: 1, 4, 16 concurrent generations');
        batch = await batching(stack.apiUrl, model, [1, 4, 16], SIZES.batchRounds, SIZES.batchTokens);
        results.batching = batch;
      }
      if (only.has(9)) peerResult = await samePeer(await longest(model));
    } finally {
      await model.dispose();
    }
  }
  if (only.has(10)) {
    // Last on this stack: the tool worker's heartbeats would count in the earlier items' idle rate.
    log(`10 tool dispatch: ${SIZES.toolCalls} calls of a no-op tool on a tool worker and of generate`);
    await stack.addToolWorker(join(ROOT, 'bench/src/noop-tool.ts'));
    tool = await toolDispatch(redis, stack.apiUrl, SIZES.toolCalls);
    results.toolDispatch = tool;
  }
  results.memory = {
    ...Object.fromEntries(stack.services.map((s) => [s.name, s.memory()])),
    redis: memoryOf(stack.redis.pid),
    bullmqWorker: memoryOf(raw.worker.proc.pid!),
  };
} finally {
  await raw.close();
  redis.disconnect();
  await stack.stop();
}
let onCluster: ClusterLifecycleResult | undefined;
if (only.has(8)) {
  // At most 500 tasks: a busy two-core host ran a cluster's lifecycle at a tenth of one Redis's rate.
  const n = Math.min(SIZES.tasks, 500);
  log(`8 lifecycle on a Redis Cluster: ${n} tasks, ${SIZES.inflight} creates in flight`);
  onCluster = await clusterLifecycle(n, SIZES.inflight, SIZES.idleMs);
  results.clusterLifecycle = onCluster;
}
if (only.has(5)) {
  log(`5 fan-out: ${SIZES.streams} streams, ${SIZES.eventsPerS} events/s for ${SIZES.fanoutS} s`);
  fan = await fanout(SIZES.streams, SIZES.eventsPerS, SIZES.fanoutS);
  results.fanout = fan;
}
agent.destroy();

const { bars, tables } = sections({
  results,
  life,
  accept,
  first,
  stream,
  batch,
  fan,
  path,
  onCluster,
  peer: peerResult,
  tool,
});

const outDir =
  args.out ?? (smoke ? await mkdtemp(join(tmpdir(), 'taskline-bench-')) : join(ROOT, 'bench/results'));
await mkdir(outDir, { recursive: true });
// What the numbers mean lives in bench/README.md with its measurements, not in each report.
const notes = smoke
  ? ['Smoke run: checks the harness and the report, not speed.']
  : ['What these numbers mean, each finding with its measurement: bench/README.md, "Current findings".'];
const report: Report = {
  generatedAt: new Date().toISOString(),
  smoke,
  host: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? '', node: process.version, redis: redisVersion },
  settings: BENCH_ENV,
  bars,
  results,
  notes,
};
validateReport(report);
await writeFile(join(outDir, 'latest.json'), JSON.stringify(report, null, 2) + '\n');
await writeFile(join(outDir, 'latest.md'), toMarkdown(report, tables));
await writeFile(join(outDir, 'latest.svg'), toSvg(report));
process.stdout.write(toMarkdown(report, tables).split('\n## ')[0] + '\n');
log(`report: ${join(outDir, 'latest.md')}`);
process.exit(0);
