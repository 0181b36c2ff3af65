import type { GenerateRequest, OnnxModel } from '@taskline/inference';
import { createTask, FINAL_TYPES, readEvents } from './http.js';
import { nowMs, openLoop, round, summarize, type Summary } from './stats.js';

export const PROMPT = 'Tell me a long story about a fox.';

/** The LMSP request a task carries, and the same request for the bare backend. */
export interface Same {
  lmsp: Record<string, unknown>;
  bare: GenerateRequest;
}

export function same(opts: { maxOutputTokens: number; temperature: number; seed: number }): Same {
  return {
    lmsp: {
      model: 'tiny-chat',
      input: PROMPT,
      max_output_tokens: opts.maxOutputTokens,
      temperature: opts.temperature,
      seed: opts.seed,
    },
    bare: {
      messages: [{ role: 'user', content: PROMPT }],
      maxOutputTokens: opts.maxOutputTokens,
      temperature: opts.temperature,
      seed: opts.seed,
    },
  };
}

interface Followed {
  id: string;
  createdAt: number;
  /** When the `202` came back. */
  acceptedAt: number;
  runningAt: number;
  firstDeltaAt: number;
  lastDeltaAt: number;
  finalAt: number;
  outputTokens: number;
}

/** Creates a task and follows its SSE stream to the final event, or only to the first delta. */
export async function follow(
  apiUrl: string,
  lmsp: Record<string, unknown>,
  sentAt = nowMs(),
  untilFirstDelta = false,
): Promise<Followed> {
  const id = await createTask(apiUrl, lmsp);
  const f: Followed = {
    id,
    createdAt: sentAt,
    acceptedAt: nowMs(),
    runningAt: 0,
    firstDeltaAt: 0,
    lastDeltaAt: 0,
    finalAt: 0,
    outputTokens: 0,
  };
  const stream = readEvents(apiUrl, id, (ev) => {
    if (ev.type === 'response.output_text.delta') {
      f.firstDeltaAt ||= ev.at;
      f.lastDeltaAt = ev.at;
      if (untilFirstDelta) stream.close();
    } else if (FINAL_TYPES.has(ev.type)) {
      f.finalAt = ev.at;
      const data = JSON.parse(ev.data) as { response?: { usage?: { output_tokens?: number } } };
      f.outputTokens = data.response?.usage?.output_tokens ?? 0;
    } else if (!f.runningAt && (JSON.parse(ev.data) as { task_status?: string }).task_status === 'running') {
      f.runningAt = ev.at;
    }
  });
  await stream.done;
  return f;
}

export interface TtftResult {
  ratePerS: number;
  seconds: number;
  maxOutputTokens: number;
  taskline: Summary;
  bare: Summary;
  overheadP50Ms: number;
  overheadP99Ms: number;
  /** Where Taskline's time goes, as its client sees it: each stage's own duration. */
  stages: {
    /** The send to the `202`. */
    accepted: Summary;
    /** The `202` to reading the `running` status over SSE (dispatch, BullMQ, claim). */
    running: Summary;
    /** `running` read to the first delta read (the model's first step, its append, delivery). */
    firstDelta: Summary;
  };
}

/** Issue item 3: create request -> first delta over SSE, against the bare model's own first token. */
export async function ttft(
  apiUrl: string,
  model: OnnxModel,
  ratePerS: number,
  seconds: number,
): Promise<TtftResult> {
  const req = same({ maxOutputTokens: 16, temperature: 0, seed: 1 });
  const bareFirst = async (at: number) => {
    let first = 0;
    await model.generate(req.bare, { onStep: () => void (first ||= nowMs()) });
    return first - at;
  };
  const stages = { accepted: [] as number[], running: [] as number[], firstDelta: [] as number[] };
  const tasklineFirst = async (at: number, measured = false) => {
    const f = await follow(apiUrl, req.lmsp, at, true);
    if (measured && f.runningAt) {
      stages.accepted.push(f.acceptedAt - at);
      stages.running.push(f.runningAt - f.acceptedAt);
      stages.firstDelta.push(f.firstDeltaAt - f.runningAt);
    }
    return f.firstDeltaAt - at;
  };
  // Each side first runs the same load for a second, unmeasured, so that JIT and connection pools
  // have settled in every process: the bar is about steady state, not a process's first second.
  const warmupS = Math.min(1, seconds);
  const bare: number[] = [];
  await openLoop(ratePerS, warmupS, (_i, at) => bareFirst(at).then(() => undefined));
  await openLoop(ratePerS, seconds, async (_i, at) => void bare.push(await bareFirst(at)));
  const tl: number[] = [];
  await openLoop(ratePerS, warmupS, (_i, at) => tasklineFirst(at).then(() => undefined));
  await openLoop(ratePerS, seconds, async (_i, at) => void tl.push(await tasklineFirst(at, true)));
  const a = summarize(tl);
  const b = summarize(bare);
  return {
    ratePerS,
    seconds,
    maxOutputTokens: 16,
    taskline: a,
    bare: b,
    overheadP50Ms: round(a.p50 - b.p50, 2),
    overheadP99Ms: round(a.p99 - b.p99, 2),
    stages: {
      accepted: summarize(stages.accepted),
      running: summarize(stages.running),
      firstDelta: summarize(stages.firstDelta),
    },
  };
}

/** The request that streams longest: the tiny model often stops early, so the seed that runs longest. */
export async function longest(model: OnnxModel): Promise<{ seed: number; maxOutputTokens: number }> {
  const maxOutputTokens =
    model.info.maxContextTokens -
    model.countTokens(same({ maxOutputTokens: 1, temperature: 1, seed: 0 }).bare.messages) -
    8;
  let best = { seed: 1, tokens: 0 };
  for (let seed = 1; seed <= 200 && best.tokens < maxOutputTokens; seed++) {
    const r = await model.generate(same({ maxOutputTokens, temperature: 1, seed }).bare);
    if (r.outputTokens > best.tokens) best = { seed, tokens: r.outputTokens };
  }
  return { seed: best.seed, maxOutputTokens };
}

export interface StreamingResult {
  seed: number;
  runs: number;
  outputTokens: number;
  /** The bar: tokens after the first, over the time from the first to the last (median of runs). */
  tasklineTokensPerS: number;
  bareTokensPerS: number;
  /** Median over runs of Taskline / bare, each run's pair measured back to back. */
  ratio: number;
  /** The whole generation, start included: Taskline from `running`, bare from the call. */
  whole: { tasklineTokensPerS: number; bareTokensPerS: number; ratio: number };
}

/**
 * Issue item 4: one long generation read over SSE against the bare decode loop, same request,
 * seed and threads. The bar compares streaming rates: output tokens after the first over the time
 * from the first token to the last, as read by the SSE client and as produced by the bare loop
 * (the worker's own `output_tokens_per_second` is defined the same way); the time to the first
 * token is item 3's. The whole-generation rates, start included, are reported next to it. Each
 * run measures bare then Taskline back to back, and the ratio is the median of the runs' own
 * ratios: a pair shares the host's speed of the moment, which on these machines moves between runs.
 */
export async function streaming(apiUrl: string, model: OnnxModel, runs: number): Promise<StreamingResult> {
  const best = await longest(model);
  const req = same({ maxOutputTokens: best.maxOutputTokens, temperature: 1, seed: best.seed });
  const rates = {
    bare: [] as number[],
    taskline: [] as number[],
    bareWhole: [] as number[],
    tasklineWhole: [] as number[],
  };
  let outputTokens = 0;
  for (let i = 0; i < runs; i++) {
    const start = nowMs();
    let first = 0;
    let last = 0;
    const r = await model.generate(req.bare, {
      onStep: () => {
        last = nowMs();
        first ||= last;
      },
    });
    rates.bare.push(((r.outputTokens - 1) * 1000) / (last - first));
    rates.bareWhole.push((r.outputTokens * 1000) / (last - start));
    const f = await follow(apiUrl, req.lmsp);
    outputTokens = f.outputTokens;
    rates.taskline.push(((f.outputTokens - 1) * 1000) / (f.lastDeltaAt - f.firstDeltaAt));
    rates.tasklineWhole.push((f.outputTokens * 1000) / (f.lastDeltaAt - f.runningAt));
  }
  const med = (xs: number[]) => summarize(xs).p50;
  return {
    seed: best.seed,
    runs,
    outputTokens,
    tasklineTokensPerS: round(med(rates.taskline), 1),
    bareTokensPerS: round(med(rates.bare), 1),
    ratio: round(med(rates.taskline.map((x, i) => x / rates.bare[i]!))),
    whole: {
      tasklineTokensPerS: round(med(rates.tasklineWhole), 1),
      bareTokensPerS: round(med(rates.bareWhole), 1),
      ratio: round(med(rates.tasklineWhole.map((x, i) => x / rates.bareWhole[i]!))),
    },
  };
}

export interface BatchingLevel {
  concurrency: number;
  tasklineTokensPerS: number;
  bareTokensPerS: number;
}

export interface BatchingResult {
  maxOutputTokens: number;
  rounds: number;
  levels: BatchingLevel[];
  speedup16: number;
}

/**
 * Issue item 6: aggregate output tokens/s of one worker at 1, 4 and 16 concurrent generations,
 * from the first `running` event to the last final event of each round; the bare batched
 * backend at the same concurrency alongside. The levels take turns round by round, so a host
 * that changes speed during the run moves every level alike, not the last one measured.
 */
export async function batching(
  apiUrl: string,
  model: OnnxModel,
  levels: number[],
  rounds: number,
  maxOutputTokens = 128,
): Promise<BatchingResult> {
  const sums = levels.map(() => ({ tlTokens: 0, tlMs: 0, bareTokens: 0, bareMs: 0 }));
  for (let r = 0; r < rounds; r++) {
    for (const [l, c] of levels.entries()) {
      const sum = sums[l]!;
      const reqs = Array.from({ length: c }, (_, i) =>
        same({ maxOutputTokens, temperature: 1, seed: 100 * r + i }),
      );
      const t0 = nowMs();
      const results = await Promise.all(reqs.map((q) => model.generate(q.bare)));
      sum.bareMs += nowMs() - t0;
      sum.bareTokens += results.reduce((s, x) => s + x.outputTokens, 0);
      const fs = await Promise.all(reqs.map((q) => follow(apiUrl, q.lmsp)));
      sum.tlTokens += fs.reduce((s, f) => s + f.outputTokens, 0);
      sum.tlMs += Math.max(...fs.map((f) => f.finalAt)) - Math.min(...fs.map((f) => f.runningAt));
    }
  }
  const out: BatchingLevel[] = levels.map((c, l) => ({
    concurrency: c,
    tasklineTokensPerS: round((sums[l]!.tlTokens * 1000) / sums[l]!.tlMs, 1),
    bareTokensPerS: round((sums[l]!.bareTokens * 1000) / sums[l]!.bareMs, 1),
  }));
  const one = out.find((l) => l.concurrency === 1);
  const top = out[out.length - 1]!;
  return {
    maxOutputTokens,
    rounds,
    levels: out,
    speedup16: one ? round(top.tasklineTokensPerS / one.tasklineTokensPerS, 2) : NaN,
  };
}
