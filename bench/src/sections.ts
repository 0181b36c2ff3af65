/**
 * The report's bars and tables, built from what one `pnpm bench` run measured: every bar with its
 * threshold and, where it misses, the measured cause the run found.
 */
import { cpus } from 'node:os';
import { clusterTable, type ClusterLifecycleResult } from './cluster.js';
import type { FanoutResult } from './fanout.js';
import type { BatchingResult, StreamingResult, TtftResult } from './model.js';
import type { PeerResult } from './peer.js';
import type { AcceptanceResult, LifecycleResult } from './queue.js';
import type { RoundTrips } from './redis-cost.js';
import { bar, type Bar } from './report.js';
import { BENCH_ENV, totalMs, type CpuCost } from './stack.js';
import { round } from './stats.js';
import type { PathTimeline } from './timeline.js';
import type { ToolDispatchResult } from './tool-dispatch.js';

/** What the run measured; an item that did not run is absent. */
export interface Measured {
  results: Record<string, unknown>;
  life?: LifecycleResult;
  accept?: AcceptanceResult;
  first?: TtftResult;
  stream?: StreamingResult;
  batch?: BatchingResult;
  fan?: FanoutResult;
  path?: { instant: PathTimeline; chat: PathTimeline };
  onCluster?: ClusterLifecycleResult;
  peer?: PeerResult;
  tool?: ToolDispatchResult;
}

export function sections({
  results,
  life,
  accept,
  first,
  stream,
  batch,
  fan,
  path,
  onCluster,
  peer,
  tool,
}: Measured): {
  bars: Bar[];
  tables: string[];
} {
  const rtt = results.redisRoundTrip as RoundTrips;
  const bars: Bar[] = [];
  const tables: string[] = [];
  /** CPU per task of every Taskline process over raw BullMQ's per job, at item 1's full speed. */
  const cpuRatio = life ? round(totalMs(life.cost.cpu.taskline) / totalMs(life.cost.cpu.bullmq), 2) : NaN;
  /** The durable writes in a row to the first token, as this run's timeline found them. */
  const writesInARow = path
    ? `${path.chat.durableInARow} durable writes in a row (${path.chat.stages
        .filter((s) => s.durable)
        .map((s) => s.stage)
        .join(', ')}) at ${rtt.paced.p50} ms each for a paced fsynced \`SET\` on this host`
    : 'several durable writes in a row (item 7 times them)';
  if (life) {
    const top = Object.entries(life.cost.cpu.taskline.msPerTask)
      .sort((a, b) => b[1] - a[1])
      .map(([name, ms]) => `${name} ${ms}`)
      .join(', ');
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
      `Taskline / raw BullMQ: ${life.ratio} of the rate, ${cpuRatio}x the CPU per task (${totalMs(life.cost.cpu.taskline)} ms against ${totalMs(life.cost.cpu.bullmq)} ms; Taskline's by process: ${top}). Not a bar: a raw job does a fraction of a task's work (fair dispatch, leases, fencing, events).`,
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
        6,
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
        15,
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
        `Taskline ${stream.tasklineTokensPerS} against bare ${stream.bareTokensPerS} tokens/s (medians), the stream ${streamMs(stream, 'tasklineTokensPerS')} ms against ${streamMs(stream, 'bareTokensPerS')}: the text of the last tick travels with the end, whose write and delivery the bare loop does not have, and the decode thread shares the cores with Redis, the api and the SSE client.`,
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
    bars.push(
      bar('5b', 'Fan-out stalls', 'streams that stalled or lost events', fan.stalledStreams, '<=', 0),
    );
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
    const topLevel = batch.levels.at(-1)!;
    bars.push(
      bar(
        '6b',
        'Batched streaming vs bare',
        `Taskline tokens/s / bare batched tokens/s, at ${topLevel.concurrency}`,
        round(topLevel.tasklineTokensPerS / topLevel.bareTokensPerS, 2),
        '>=',
        0.9,
        '',
        `each round's tasks reach \`running\` apart and share the cores with their appends, the api and Redis (${topLevel.tasklineTokensPerS} against ${topLevel.bareTokensPerS} tokens/s).`,
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
    bars.push(
      bar(
        '7a',
        'Redis commands',
        'per finished instant task (item 1)',
        life.cost.taskline.perTask,
        '<=',
        60,
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
          `the stages found: ${path.chat.stages.map((s) => `${s.stage} (${s.process}${s.durable ? '' : ', no fsync'})`).join(' -> ')}.`,
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
      ...cpuTable('Taskline process', life.cost.cpu.taskline, accept?.taskline.cpu, accept?.ratePerS),
      ...cpuTable('Raw BullMQ process', life.cost.cpu.bullmq, accept?.bullmq.cpu, accept?.ratePerS),
      '| Process | peak RSS (MiB) |',
      '| --- | --- |',
      ...Object.entries(mem).map(([name, m]) => `| ${name} | ${m.peakRssMb} |`),
      ...(fan ? [`| api with ${fan.streams} streams (fan-out run) | ${fan.apiMemory.peakRssMb} |`] : []),
      '',
    );
  }
  if (peer) {
    const { bars: peerBars, tables: peerTables } = peerSection(peer);
    bars.push(...peerBars);
    tables.push(...peerTables);
  }
  if (tool) {
    bars.push(toolBar(tool));
    tables.push(...toolTable(tool));
  }
  return { bars, tables };
}

/** How long item 4's stream lasted at a median rate, first token to last (the tokens after the first). */
const streamMs = (s: StreamingResult, rate: 'tasklineTokensPerS' | 'bareTokensPerS') =>
  round(((s.outputTokens - 1) * 1000) / s[rate], 1);

/**
 * Item 10's bar: a tool on its own worker starts as soon as a built-in one. Both take the same
 * path (admission, create, the scheduler's dispatch, a BullMQ job, a claim), on another queue.
 */
function toolBar(t: ToolDispatchResult): Bar {
  return bar(
    '10',
    'Tool dispatch vs built-in',
    'no-op on a tool worker p50 / built-in tool p50, call to `run`',
    t.p50Ratio,
    '<=',
    1.5,
    '×',
    `no-op ${t.worker.p50} ms (p99 ${t.worker.p99}), generate ${t.builtin.p50} ms (p99 ${t.builtin.p99}).`,
  );
}

/** Item 10's table: both sides' delay from the call to `run`, side by side. */
function toolTable(t: ToolDispatchResult): string[] {
  const row = (name: string, s: ToolDispatchResult['worker']) =>
    `| ${name} | ${s.p50} | ${s.p90} | ${s.p99} | ${s.max} |`;
  return [
    '## 10. Tool dispatch',
    '',
    `${t.calls} MCP \`tools/call\` tasks of each, one at a time, alternating. The no-op answers when its \`run\` began; \`generate\`'s \`run\` begins by creating its child generation, whose record says when.`,
    '',
    '| Tool (call to `run` start, ms) | p50 | p90 | p99 | max |',
    '| --- | --- | --- | --- | --- |',
    row('no-op on a separate tool worker (`tool:bench_noop`)', t.worker),
    row('built-in `generate` on the gpu-worker (`tools`)', t.builtin),
    '',
  ];
}

/** Item 9: Taskline against the same-work peer, measured in this run. */
function peerSection(p: PeerResult): { bars: Bar[]; tables: string[] } {
  return { bars: peerBars(p), tables: peerTable(p) };
}

/** Item 9's bars, each with the causes this run measured. */
function peerBars(p: PeerResult): Bar[] {
  const tl = p.taskline;
  const pr = p.peer;
  const cpuBy = (side: PeerResult['taskline']) =>
    Object.entries(side.cpu.msPerTask)
      .map(([name, ms]) => `${name} ${ms}`)
      .join(', ');
  const tick = Number(BENCH_ENV.TASKLINE_STREAM_FLUSH_MS ?? 50);
  const levels = p.streaming.map((x) => x.concurrency).join(' and ');
  return [
    bar(
      '9a',
      'CPU per task vs peer',
      'Taskline / same-work peer, all processes',
      p.cpuRatio,
      '<=',
      2,
      'x',
      `Taskline ${tl.cpuMsPerTask} ms per task (${cpuBy(tl)}), the peer ${pr.cpuMsPerTask} ms (${cpuBy(pr)}).`,
    ),
    bar(
      '9b',
      'Redis commands per task vs peer',
      'Taskline / same-work peer',
      p.commandsRatio,
      '<=',
      1.5,
      'x',
      `A one-token task: Taskline ${tl.commandsPerOneTokenTask} commands, the peer ${pr.commandsPerOneTokenTask} (item 7's path: rate limit, record, offer, dispatch, BullMQ job, claim, finish); per further token ${tl.commandsPerToken} against ${pr.commandsPerToken}.`,
    ),
    bar(
      '9c',
      'TTFT p50 vs peer',
      'Taskline p50 / peer p50',
      p.ttftP50Ratio,
      '<=',
      1,
      'x',
      `Taskline ${tl.ttft.p50} ms, the peer ${pr.ttft.p50} ms: ${writesBeforeFirstToken}`,
    ),
    bar(
      '9d',
      'TTFT p99 vs peer',
      'Taskline p99 / peer p99',
      p.ttftP99Ratio,
      '<=',
      1,
      'x',
      `Taskline ${tl.ttft.p99} ms, the peer ${pr.ttft.p99} ms: ${writesBeforeFirstToken}`,
    ),
    bar(
      '9e',
      'Redis commands per token',
      `Taskline at full decode speed over a one-token task, the most of ${levels} concurrent`,
      Math.max(...p.streaming.map((x) => x.commandsPerToken)),
      '<=',
      0.3,
      '',
      `${p.streaming.map((x) => `${x.commandsPerToken} at ${x.concurrency} (${x.tokensPerTask} tokens a task)`).join(', ')}; one append a ${tick} ms tick of 7 commands (append.lua's reads, checks and writes).`,
    ),
    bar(
      '9f',
      'Redis commands/s per streaming task',
      `Taskline, the most of ${levels} concurrent`,
      Math.max(...p.streaming.map((x) => x.commandsPerS)),
      '<=',
      25,
      '',
      `One append.lua a ${tick} ms tick while a task streams, 7 commands each (EVALSHA, HMGET, the XREVRANGE check, APPEND of the token ids, HSET, XADD, SPUBLISH): ${Math.round((1000 / tick) * 7)} commands/s at most, plus a lease renewal a third of the lease.`,
    ),
  ];
}

/** Item 9's table: both sides' measurements, and what Taskline does that the peer does not. */
function peerTable(p: PeerResult): string[] {
  const tl = p.taskline;
  const pr = p.peer;
  const row = (what: string, a: number | string, b: number | string) => `| ${what} | ${a} | ${b} |`;
  const topOf = (side: PeerResult['taskline']) =>
    side.oneTokenTop
      .slice(0, 6)
      .map((t) => `${t.command} ${t.perTask}`)
      .join(', ');
  return [
    '## 9. Same-work peer',
    '',
    `tiny-chat, ${p.ratePerS} tasks/s for ${p.seconds} s, max ${p.maxOutputTokens} output tokens (then 1), temperature 1, read over SSE, each side after a second unmeasured. The peer: an Express POST that writes a record and \`queue.add\`s, a BullMQ worker with the same model in a thread XADDing each step's delta, SSE over XREAD BLOCK.`,
    '',
    '| | Taskline | Peer |',
    '| --- | --- | --- |',
    row('CPU ms per task, all processes', tl.cpuMsPerTask, pr.cpuMsPerTask),
    row('Redis commands per task', tl.commandsPerTask, pr.commandsPerTask),
    row('Redis commands per one-token task', tl.commandsPerOneTokenTask, pr.commandsPerOneTokenTask),
    row('Redis commands per further token', tl.commandsPerToken, pr.commandsPerToken),
    row('Most frequent commands per one-token task', topOf(tl), topOf(pr)),
    row('Tokens per task', tl.tokensPerTask, pr.tokensPerTask),
    row('Bytes its stream keeps in Redis per token', tl.bytesPerToken, pr.bytesPerToken),
    row('TTFT p50 / p99 (ms)', `${tl.ttft.p50} / ${tl.ttft.p99}`, `${pr.ttft.p50} / ${pr.ttft.p99}`),
    '',
    '| Concurrent long generations (Taskline) | tokens per task | streaming ms (p50) | commands/s per task above a one-token task | commands per token above it |',
    '| --- | --- | --- | --- | --- |',
    ...p.streaming.map(
      (x) =>
        `| ${x.concurrency} | ${x.tokensPerTask} | ${x.streamingMs} | ${x.commandsPerS} | ${x.commandsPerToken} |`,
    ),
    '',
    'What Taskline does that the peer does not: per-tenant rate limits and fair dispatch, leases with restarts (`on_restart`), attempt-fenced writes, idempotent creates, events numbered with no gap and resumable with `Last-Event-ID`, cancel, input requests, retention, LMSP/OpenAI/MCP surfaces.',
    '',
  ];
}

const writesBeforeFirstToken =
  "Taskline's first token waits on item 7b's durable writes in a row, the peer's on its record, BullMQ's add and move to active, and its first XADD.";

/** CPU ms per task by process: at full speed (item 1) and, when it ran, at item 2's fixed load. */
function cpuTable(title: string, full: CpuCost, paced: CpuCost | undefined, ratePerS?: number): string[] {
  const cols = paced ? ` | at ${ratePerS}/s (item 2)` : '';
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
