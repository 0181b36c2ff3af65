/**
 * Bench item 9: Taskline against the same-work peer (peer-server.ts, peer-worker.ts) in the same
 * run on the same Redis: the same tiny-chat requests, streamed over SSE to the first and the last
 * token; CPU per task of every process, Redis commands per task and per token, time to first token.
 */
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { freePort } from '@taskline/testing';
import { forkChild, type Child } from './children.js';
import { callJson, readEvents } from './http.js';
import { follow, PROMPT, same } from './model.js';
import { costOf } from './queue.js';
import { taskKeys } from '@taskline/engine/keys';
import { commandCalls, diffCalls, keyBytes } from './redis-cost.js';
import { BENCH_ENV, cpuMeter, ROOT, totalMs, type CpuCost, type Procs } from './stack.js';
import { nowMs, openLoop, round, sleep, summarize, type Summary } from './stats.js';

/** One generation as its SSE client saw it. */
interface Generation {
  /** The keys that hold its stream in Redis (events, and Taskline's token ids). */
  keys: string[];
  firstDeltaAt: number;
  finalAt: number;
  outputTokens: number;
}

export interface PeerSide {
  ttft: Summary;
  cpu: CpuCost;
  cpuMsPerTask: number;
  commandsPerTask: number;
  /** The same with `max_output_tokens: 1`: what a task costs before its tokens. */
  commandsPerOneTokenTask: number;
  /** Its most frequent commands (scripts' own included), per one-token task. */
  oneTokenTop: { command: string; perTask: number }[];
  tokensPerTask: number;
  /** Bytes its stream keeps in Redis (MEMORY USAGE of the stream's keys) per output token. */
  bytesPerToken: number;
  /** Commands above the one-token task's, per token after the first. */
  commandsPerToken: number;
}

export interface PeerResult {
  ratePerS: number;
  seconds: number;
  maxOutputTokens: number;
  taskline: PeerSide;
  peer: PeerSide;
  cpuRatio: number;
  commandsRatio: number;
  ttftP50Ratio: number;
  ttftP99Ratio: number;
  /** Taskline's commands/s per streaming task and per token above a one-token task's, long generations at each concurrency. */
  streaming: StreamingCommands[];
}

export interface StreamingCommands {
  concurrency: number;
  tokensPerTask: number;
  /** Median time from a task's first delta to its end. */
  streamingMs: number;
  commandsPerS: number;
  /** Commands per generated token above a one-token task's, at full decode speed. */
  commandsPerToken: number;
}

/** The peer's two processes, started on the benchmark's Redis. */
export interface Peer {
  url: string;
  server: Child;
  worker: Child;
  close(): Promise<void>;
}

export async function startPeer(redisUrl: string): Promise<Peer> {
  const port = await freePort();
  const server = await forkChild('./peer-server.ts', { BENCH_REDIS_URL: redisUrl, BENCH_PORT: String(port) });
  const worker = await forkChild('./peer-worker.ts', {
    BENCH_REDIS_URL: redisUrl,
    BENCH_MODELS_DIR: join(ROOT, 'models'),
    BENCH_INTRA_OP_THREADS: BENCH_ENV.TASKLINE_INTRA_OP_THREADS ?? '',
    BENCH_CONCURRENCY: BENCH_ENV.TASKLINE_WORKER_SLOTS ?? '64',
  });
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    worker,
    close: async () => {
      await server.stop();
      await worker.stop();
    },
  };
}

/** Creates a peer task and reads its SSE stream to `done`. */
async function followPeer(url: string, body: Record<string, unknown>): Promise<Generation> {
  const created = await callJson(url, 'POST', '/tasks', body);
  const id = created.body.id as string;
  const g: Generation = { keys: [`peer:events:${id}`], firstDeltaAt: 0, finalAt: 0, outputTokens: 0 };
  await readEvents(
    url,
    id,
    (ev) => {
      if (ev.type === 'delta') g.firstDeltaAt ||= ev.at;
      if (ev.type === 'done') {
        g.finalAt = ev.at;
        g.outputTokens = (JSON.parse(ev.data) as { output_tokens: number }).output_tokens;
      }
    },
    { path: `/tasks/${id}/events` },
  ).done;
  return g;
}

async function followTaskline(
  apiUrl: string,
  lmsp: Record<string, unknown>,
  at: number,
): Promise<Generation> {
  const f = await follow(apiUrl, lmsp, at);
  const { events, tokens } = taskKeys(f.id);
  return {
    keys: [events, tokens],
    firstDeltaAt: f.firstDeltaAt,
    finalAt: f.finalAt,
    outputTokens: f.outputTokens,
  };
}

type Run = (maxOutputTokens: number, seed: number, at: number) => Promise<Generation>;

/** One open-loop pass: commands per task, and with `meter` the CPU and the generations. */
async function pass(
  redis: Redis,
  run: Run,
  background: Map<string, number>,
  opts: { ratePerS: number; seconds: number; maxOutputTokens: number; procs?: Procs },
) {
  const gens: { g: Generation; at: number }[] = [];
  const c0 = await commandCalls(redis);
  const t0 = nowMs();
  const cpu = opts.procs && cpuMeter(opts.procs);
  await openLoop(opts.ratePerS, opts.seconds, async (i, at) => {
    gens.push({ g: await run(opts.maxOutputTokens, 1000 + i, at), at });
  });
  const cpuCost = cpu?.perTask(gens.length);
  // A worker's last writes (BullMQ's completion) follow the final event.
  await sleep(200);
  const commands = costOf(diffCalls(await commandCalls(redis), c0), gens.length, background, nowMs() - t0);
  return { gens, cpuCost, commands: commands.perTask, top: commands.top };
}

async function side(
  redis: Redis,
  run: Run,
  procs: Procs,
  background: Map<string, number>,
  ratePerS: number,
  seconds: number,
  maxOutputTokens: number,
): Promise<PeerSide> {
  // A second of the same load first, unmeasured (JIT, connection pools, the model's thread).
  await openLoop(ratePerS, Math.min(1, seconds), (i, at) =>
    run(maxOutputTokens, i, at).then(() => undefined),
  );
  const one = await pass(redis, run, background, { ratePerS, seconds, maxOutputTokens: 1 });
  const full = await pass(redis, run, background, { ratePerS, seconds, maxOutputTokens, procs });
  const tokens = full.gens.reduce((s, x) => s + x.g.outputTokens, 0) / full.gens.length;
  const extra = full.commands - one.commands;
  let bytes = 0;
  for (const { g } of full.gens)
    bytes += Object.values(await keyBytes(redis, g.keys)).reduce((a, b) => a + b, 0);
  return {
    ttft: summarize(full.gens.map((x) => x.g.firstDeltaAt - x.at)),
    cpu: full.cpuCost!,
    cpuMsPerTask: totalMs(full.cpuCost!),
    commandsPerTask: full.commands,
    commandsPerOneTokenTask: one.commands,
    oneTokenTop: one.top,
    tokensPerTask: round(tokens, 1),
    bytesPerToken: round(bytes / (tokens * full.gens.length), 1),
    commandsPerToken: round(extra / Math.max(1, tokens - 1), 3),
  };
}

/**
 * `c` long Taskline generations at once: the commands each costs above a one-token task, over the
 * median time it streamed. The tick bounds this, not the model's speed: at 16 each task makes
 * tokens several times slower than alone.
 */
async function streamingCommands(
  redis: Redis,
  apiUrl: string,
  background: Map<string, number>,
  c: number,
  long: { seed: number; maxOutputTokens: number },
): Promise<StreamingCommands> {
  // `c` tasks at once, as many rounds as make 16 tasks, costed per task: one-token ones first, at
  // the same concurrency, so that what BullMQ and dispatch share out over a burst cancels out of
  // the difference, and 16 tasks per level keep the idle background's noise small.
  const rounds = Math.max(1, Math.ceil(16 / c));
  const burst = async (max: number) => {
    const lmsp = same({ maxOutputTokens: max, temperature: 1, seed: long.seed }).lmsp;
    const c0 = await commandCalls(redis);
    const t0 = nowMs();
    const gens: Generation[] = [];
    for (let r = 0; r < rounds; r++)
      gens.push(
        ...(await Promise.all(Array.from({ length: c }, () => followTaskline(apiUrl, lmsp, nowMs())))),
      );
    await sleep(200);
    const delta = diffCalls(await commandCalls(redis), c0);
    return { gens, perTask: costOf(delta, gens.length, background, nowMs() - t0).perTask };
  };
  const one = await burst(1);
  const full = await burst(long.maxOutputTokens);
  const streamingMs = summarize(full.gens.map((g) => g.finalAt - g.firstDeltaAt)).p50;
  const tokensPerTask = full.gens.reduce((n, g) => n + g.outputTokens, 0) / full.gens.length;
  const extra = full.perTask - one.perTask;
  return {
    concurrency: c,
    tokensPerTask: round(tokensPerTask, 1),
    streamingMs: round(streamingMs, 1),
    commandsPerS: round((extra * 1000) / streamingMs, 1),
    commandsPerToken: round(extra / Math.max(1, tokensPerTask - 1), 3),
  };
}

/** Item 9: both sides at `ratePerS` for `seconds`, one-token tasks and then `maxOutputTokens` ones. */
export async function sameWork(
  redis: Redis,
  apiUrl: string,
  peer: Peer,
  procs: { taskline: Procs; peer: Procs },
  background: Map<string, number>,
  sizes: { peerRate: number; peerS: number; peerTokens: number },
  /** The longest-streaming request (item 4's), for Taskline's commands/s per streaming task. */
  long: { seed: number; maxOutputTokens: number },
): Promise<PeerResult> {
  const { peerRate: ratePerS, peerS: seconds, peerTokens: maxOutputTokens } = sizes;
  const lmsp = (max: number, seed: number) => same({ maxOutputTokens: max, temperature: 1, seed }).lmsp;
  const taskline: Run = (max, seed, at) => followTaskline(apiUrl, lmsp(max, seed), at);
  // The peer's clock starts at the same send time (`at`) as Taskline's; it has no stages to split.
  const peerRun: Run = (max, seed) =>
    followPeer(peer.url, { input: PROMPT, max_output_tokens: max, temperature: 1, seed });
  const tl = await side(redis, taskline, procs.taskline, background, ratePerS, seconds, maxOutputTokens);
  const pr = await side(redis, peerRun, procs.peer, background, ratePerS, seconds, maxOutputTokens);
  const streaming: StreamingCommands[] = [];
  for (const c of [1, 16]) streaming.push(await streamingCommands(redis, apiUrl, background, c, long));
  return {
    ratePerS,
    seconds,
    maxOutputTokens,
    taskline: tl,
    peer: pr,
    cpuRatio: round(tl.cpuMsPerTask / pr.cpuMsPerTask, 2),
    commandsRatio: round(tl.commandsPerTask / pr.commandsPerTask, 2),
    ttftP50Ratio: round(tl.ttft.p50 / pr.ttft.p50, 2),
    ttftP99Ratio: round(tl.ttft.p99 / pr.ttft.p99, 2),
    streaming,
  };
}
