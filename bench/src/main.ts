/**
 * `pnpm bench`: Taskline against the layers beneath it, each pair side by side in one run on one
 * Redis (AOF, appendfsync always). Writes bench/results/latest.{json,md,svg}.
 * `pnpm bench:smoke`: the same harness at toy sizes, into a temporary folder; checks that every
 * benchmark runs and the report is well-formed, never speed.
 */
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
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
import { roundTrips, type RoundTrips } from './redis-cost.js';
import { clusterLifecycle, clusterTable, type ClusterLifecycleResult } from './cluster.js';
import { bar, toMarkdown, toSvg, validateReport, type Bar, type Report } from './report.js';
import { BENCH_ENV, memoryOf, ROOT, startStack, type CpuCost, type Procs } from './stack.js';
import { createMany, waitEnded } from './taskline.js';
import { pathTimeline, type PathTimeline } from './timeline.js';
import { round } from './stats.js';

const { values: args } = parseArgs({
  // pnpm passes on the `--` that npm needs (`pnpm bench -- --only 1`): both spellings work.
  args: process.argv.slice(2).filter((arg, i) => !(i === 0 && arg === '--')),
  options: {
    smoke: { type: 'boolean', default: false },
    out: { type: 'string' },
    /** Comma-separated item numbers to run (1-8); default all (smoke: 1-7, item 8 starts six Redis nodes). */
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
const only = new Set((args.only ?? (smoke ? '1,2,3,4,5,6,7' : '1,2,3,4,5,6,7,8')).split(',').map(Number));
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
    };
const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);

const results: Record<string, unknown> = { sizes: SIZES };
let life: LifecycleResult | undefined;
let accept: AcceptanceResult | undefined;
let first: TtftResult | undefined;
let stream: StreamingResult | undefined;
let batch: BatchingResult | undefined;
let fan: FanoutResult | undefined;
let path: { instant: PathTimeline; chat: PathTimeline } | undefined;
let redisVersion = '';

const stack = await startStack();
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
  const background = await idleRate(redis, SIZES.idleMs);

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
  if (only.has(3) || only.has(4) || only.has(6)) {
    // Same model folder, onnxruntime settings and thread count as the worker's.
    const model = await loadOnnxModel(join(ROOT, 'models/tiny-chat'), {
      id: 'tiny-chat',
      intraOpThreads: Number(BENCH_ENV.TASKLINE_INTRA_OP_THREADS) || undefined,
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
    } finally {
      await model.dispose();
    }
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

const rtt = results.redisRoundTrip as RoundTrips;
const bars: Bar[] = [];
const tables: string[] = [];
/** CPU per task of every Taskline process over raw BullMQ's per job, at item 1's full speed. */
const cpuRatio = life ? round(totalMs(life.cost.cpu.taskline) / totalMs(life.cost.cpu.bullmq), 2) : NaN;
/** The durable writes in a row to the first token, as this run's timeline found them. */
const writesInARow = path
  ? `${path.chat.durableInARow} durable writes in a row (${path.chat.stages.map((s) => s.stage).join(', ')}) at ${rtt.paced.p50} ms each for a paced fsynced \`SET\` on this host`
  : 'several durable writes in a row (item 7 times them)';
if (life) {
  bars.push(
    bar(
      '1',
      'Lifecycle throughput',
      'Taskline / raw BullMQ tasks per s',
      life.ratio,
      '>=',
      0.35,
      '',
      `CPU: Taskline's processes spend ${totalMs(life.cost.cpu.taskline)} ms per task, raw BullMQ's ${totalMs(life.cost.cpu.bullmq)} ms per job (${cpuRatio}x, item 7), on ${cpus().length} cores shared by all of them.`,
    ),
  );
  tables.push(
    '## 1. Lifecycle throughput',
    '',
    `${life.tasks} tasks, ${life.concurrency} creates in flight, worker slots ${BENCH_ENV.TASKLINE_WORKER_SLOTS}; the raw pair: \`Queue.add\` with as many in flight, a no-op \`Worker\` process of the same concurrency.`,
    '',
    '| | per s | seconds |',
    '| --- | --- | --- |',
    `| Taskline (HTTP create -> scheduler -> worker claim -> finish, instant backend) | ${life.taskline.tasksPerS} | ${life.taskline.seconds} |`,
    `| Raw BullMQ (add -> no-op processor -> completed) | ${life.bullmq.jobsPerS} | ${life.bullmq.seconds} |`,
    '',
  );
}
if (onCluster) {
  const single = life && { ...life.taskline, commandsPerTask: life.cost.taskline.perTask };
  tables.push(...clusterTable(single, onCluster));
}
if (accept) {
  const busy = `at ${accept.ratePerS}/s the processes on Taskline's path kept ${accept.taskline.cpu.busyPercent}% of the cores busy (raw BullMQ's ${accept.bullmq.cpu.busyPercent}%), and a create is two durable writes (rate limit, record) against one \`queue.add\`, each ${rtt.paced.p50} ms paced on this host.`;
  bars.push(
    bar('2a', 'Acceptance p50', 'POST /tasks p50 / queue.add p50', accept.p50Ratio, '<=', 3, 'x', busy),
  );
  bars.push(
    bar('2b', 'Acceptance p99', 'POST /tasks p99 / queue.add p99', accept.p99Ratio, '<=', 4, 'x', busy),
  );
  tables.push(
    '## 2. Acceptance latency',
    '',
    `Open loop, ${accept.ratePerS}/s for ${accept.seconds} s each; latency from the send to the answer (ms); the last column is how late the sends left against their schedule (p99, ms).`,
    '',
    '| | p50 | p90 | p99 | max | errors | send lag p99 |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    `| \`POST /lmsp/v1/tasks\` -> 202 | ${accept.taskline.p50} | ${accept.taskline.p90} | ${accept.taskline.p99} | ${accept.taskline.max} | ${accept.taskline.errors} | ${accept.taskline.sendLagP99} |`,
    `| raw \`queue.add\` | ${accept.bullmq.p50} | ${accept.bullmq.p90} | ${accept.bullmq.p99} | ${accept.bullmq.max} | ${accept.bullmq.errors} | ${accept.bullmq.sendLagP99} |`,
    '',
    `Each side's tasks are worked while the load runs. The processes on Taskline's path (api, scheduler, worker, Redis, this client) kept ${accept.taskline.cpu.busyPercent}% of the machine's ${cpus().length} cores busy, ${totalMs(accept.taskline.cpu)} ms of CPU per task; raw BullMQ's (Redis, its worker, this client) ${accept.bullmq.cpu.busyPercent}%, ${totalMs(accept.bullmq.cpu)} ms per job (by process in item 7).`,
    '',
  );
}
if (first) {
  const stagesCause = `stages at p50: send -> 202 ${first.stages.accepted.p50} ms, 202 -> running ${first.stages.running.p50} ms, running -> first delta ${first.stages.firstDelta.p50} ms; the way holds ${writesInARow}.`;
  bars.push(
    bar(
      '3a',
      'TTFT overhead p50',
      'Taskline p50 - bare p50',
      first.overheadP50Ms,
      '<=',
      5,
      ' ms',
      stagesCause,
    ),
  );
  bars.push(
    bar(
      '3b',
      'TTFT overhead p99',
      'Taskline p99 - bare p99',
      first.overheadP99Ms,
      '<=',
      25,
      ' ms',
      stagesCause,
    ),
  );
  tables.push(
    '## 3. Time to first token',
    '',
    `Open loop, ${first.ratePerS}/s for ${first.seconds} s, tiny-chat, greedy, ${first.maxOutputTokens} tokens (ms).`,
    '',
    '| | p50 | p90 | p99 | max |',
    '| --- | --- | --- | --- | --- |',
    `| create -> first \`response.output_text.delta\` over SSE | ${first.taskline.p50} | ${first.taskline.p90} | ${first.taskline.p99} | ${first.taskline.max} |`,
    `| bare model in-process: call -> first step | ${first.bare.p50} | ${first.bare.p90} | ${first.bare.p99} | ${first.bare.max} |`,
    '',
    "Taskline's stages as its client sees them, each on its own (ms; the stages' percentiles do not add up to the total's):",
    '',
    '| stage | p50 | p90 | p99 |',
    '| --- | --- | --- | --- |',
    ...(
      [
        ['send -> `202`', first.stages.accepted],
        ['`202` -> `running` read over SSE (dispatch, BullMQ, claim)', first.stages.running],
        ['`running` -> first delta read (first step, append, delivery)', first.stages.firstDelta],
      ] as const
    ).map(([name, s]) => `| ${name} | ${s.p50} | ${s.p90} | ${s.p99} |`),
    '',
    `For scale: a task's way to its first token holds ${writesInARow} (back to back ${rtt.backToBack.p50} ms; p99 paced ${rtt.paced.p99}).`,
    '',
  );
}
if (stream) {
  bars.push(
    bar(
      '4',
      'Streaming',
      'SSE tokens/s / bare decode tokens/s',
      stream.ratio,
      '>=',
      0.95,
      '',
      `Taskline ${stream.tasklineTokensPerS} against bare ${stream.bareTokensPerS} tokens/s (medians): the decode thread shares the cores with Redis, the api and the SSE client, which the bare loop does not.`,
    ),
  );
  tables.push(
    '## 4. Streaming',
    '',
    `One generation of ${stream.outputTokens} tokens (seed ${stream.seed}), median of ${stream.runs}: from the first token to the last, Taskline ${stream.tasklineTokensPerS} tokens/s over SSE, bare decode loop ${stream.bareTokensPerS} tokens/s; the bar is the median of the runs' own ratios (each run's pair back to back). The whole generation, start included (Taskline from \`running\`, bare from the call): ${stream.whole.tasklineTokensPerS} against ${stream.whole.bareTokensPerS} tokens/s (${stream.whole.ratio}).`,
    '',
  );
}
if (fan) {
  bars.push(
    bar(
      '5a',
      'Fan-out p99',
      `worker write -> client read, ${fan.streams} streams`,
      fan.latency.p99,
      '<=',
      50,
      ' ms',
      `the host was ${fan.hostIdlePercent}% idle while the writer ran; the api spent ${fan.apiCpuUsPerEvent} µs of CPU per delivered event.`,
    ),
  );
  bars.push(bar('5b', 'Fan-out stalls', 'streams that stalled or lost events', fan.stalledStreams, '<=', 0));
  tables.push(
    '## 5. Fan-out',
    '',
    `${fan.streams} SSE streams on one api process; writer target ${fan.targetEventsPerS} events/s, achieved ${fan.writtenEventsPerS} events/s for ${fan.seconds} s (append errors ${fan.appendErrors}).`,
    '',
    '| p50 | p90 | p99 | max | delivered | missing | stalled streams | longest gap | api CPU per event | host idle | api RSS idle / with streams / peak |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    `| ${fan.latency.p50} ms | ${fan.latency.p90} ms | ${fan.latency.p99} ms | ${fan.latency.max} ms | ${fan.delivered} | ${fan.missing} | ${fan.stalledStreams} | ${fan.maxGapMs} ms | ${fan.apiCpuUsPerEvent} µs | ${fan.hostIdlePercent}% | ${fan.apiMemory.idleRssMb} / ${fan.apiMemory.withStreamsRssMb} / ${fan.apiMemory.peakRssMb} MiB |`,
    '',
  );
}
if (batch) {
  bars.push(
    bar(
      '6',
      'Batching',
      `tokens/s at ${batch.levels.at(-1)!.concurrency} / at 1`,
      batch.speedup16,
      '>=',
      3,
      'x',
      `the worker at ${batch.levels.at(-1)!.concurrency} reached ${Math.round((batch.levels.at(-1)!.tasklineTokensPerS / batch.levels.at(-1)!.bareTokensPerS) * 100)}% of the bare batched backend, which itself scaled ${round(batch.levels.at(-1)!.bareTokensPerS / batch.levels[0]!.bareTokensPerS, 2)}x.`,
    ),
  );
  tables.push(
    '## 6. Batching',
    '',
    `tiny-chat, up to ${batch.maxOutputTokens} tokens each, ${batch.rounds} rounds per level; aggregate output tokens/s.`,
    '',
    '| concurrent | Taskline worker | bare batched backend |',
    '| --- | --- | --- |',
    ...batch.levels.map((l) => `| ${l.concurrency} | ${l.tasklineTokensPerS} | ${l.bareTokensPerS} |`),
    '',
  );
}
if (life) {
  const top = Object.entries(life.cost.cpu.taskline.msPerTask)
    .sort((a, b) => b[1] - a[1])
    .map(([name, ms]) => `${name} ${ms}`)
    .join(', ');
  bars.push(
    bar(
      '7a',
      'Redis commands',
      'per finished instant task (item 1)',
      life.cost.taskline.perTask,
      '<=',
      50,
      '',
      path
        ? `one instant task under MONITOR ran ${path.instant.commands} commands, ${path.instant.bullmqCommands} of them BullMQ's (add, move to active, finish: raw BullMQ's whole job is ${life.cost.bullmq.perTask}); the rest by kind in item 7's table.`
        : undefined,
    ),
  );
  if (path)
    bars.push(
      bar(
        '7b',
        'Durable writes in a row',
        'POST /lmsp/v1/tasks -> first delta append, one task under MONITOR',
        path.chat.durableInARow,
        '<=',
        4,
        '',
        `the stages found: ${path.chat.stages.map((s) => `${s.stage} (${s.process})`).join(' -> ')}.`,
      ),
    );
  bars.push(
    bar(
      '7c',
      'CPU per task',
      'all Taskline processes / raw BullMQ per job (item 1)',
      cpuRatio,
      '<=',
      3,
      'x',
      `ms per task by process: ${top}.`,
    ),
  );
  const mem = results.memory as Record<string, { peakRssMb: number }>;
  tables.push(
    '## 7. Cost per task',
    '',
    `Redis commands per finished task (\`INFO commandstats\`, net of the idle background and the benchmark's own reads): Taskline ${life.cost.taskline.perTask}, raw BullMQ ${life.cost.bullmq.perTask}. Bytes kept in Redis per finished task (used_memory delta): ${life.cost.bytesPerTask}.`,
    '',
    '| Taskline command | per task | | BullMQ command | per job |',
    '| --- | --- | --- | --- | --- |',
    ...Array.from(
      { length: Math.max(life.cost.taskline.top.length, life.cost.bullmq.top.length) },
      (_, i) => {
        const a = life!.cost.taskline.top[i];
        const b = life!.cost.bullmq.top[i];
        return `| ${a?.command ?? ''} | ${a?.perTask ?? ''} | | ${b?.command ?? ''} | ${b?.perTask ?? ''} |`;
      },
    ),
    '',
    ...(path
      ? [
          `One task at a time under \`MONITOR\` (a tiny-chat task to its first delta; an instant one for its commands: ${path.instant.commands}, BullMQ's ${path.instant.bullmqCommands}). Each row is one round trip, ms after the first:`,
          '',
          '| stage | process | at (ms) |',
          '| --- | --- | --- |',
          ...path.chat.stages.map((s) => `| ${s.stage} | ${s.process} | ${s.atMs} |`),
          '',
        ]
      : []),
    '| Key kept per finished task | bytes |',
    '| --- | --- |',
    ...life.cost.bytesByKey.map((k) => `| \`${k.pattern}\` | ${k.bytesPerTask} |`),
    '',
    ...cpuTable('Taskline process', life.cost.cpu.taskline, accept?.taskline.cpu),
    ...cpuTable('Raw BullMQ process', life.cost.cpu.bullmq, accept?.bullmq.cpu),
    '| Process | peak RSS (MiB) |',
    '| --- | --- |',
    ...Object.entries(mem).map(([name, m]) => `| ${name} | ${m.peakRssMb} |`),
    ...(fan ? [`| api with ${fan.streams} streams (fan-out run) | ${fan.apiMemory.peakRssMb} |`] : []),
    '',
  );
}

function totalMs(cost: CpuCost): number {
  return Math.round(Object.values(cost.msPerTask).reduce((a, b) => a + b, 0) * 100) / 100;
}

/** CPU ms per task by process: at full speed (item 1) and, when it ran, at item 2's fixed load. */
function cpuTable(title: string, full: CpuCost, paced: CpuCost | undefined): string[] {
  const cols = paced ? ` | at ${accept!.ratePerS}/s (item 2)` : '';
  return [
    `| ${title} | CPU ms per task, full speed (item 1)${cols} |`,
    `| --- | --- ${paced ? '| --- ' : ''}|`,
    ...Object.keys(full.msPerTask).map(
      (name) => `| ${name} | ${full.msPerTask[name]}${paced ? ` | ${paced.msPerTask[name]}` : ''} |`,
    ),
    `| **all** | **${totalMs(full)}**${paced ? ` | **${totalMs(paced)}**` : ''} |`,
    '',
  ];
}

const outDir =
  args.out ?? (smoke ? await mkdtemp(join(tmpdir(), 'taskline-bench-')) : join(ROOT, 'bench/results'));
await mkdir(outDir, { recursive: true });
const notesFile = join(ROOT, 'bench/notes.md');
const notes = smoke
  ? ['Smoke run: checks the harness and the report, not speed.']
  : (await readFile(notesFile, 'utf8').catch(() => ''))
      .split('\n')
      .filter((l) => l.startsWith('- '))
      .map((l) => l.slice(2));
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
