// One ONNX model decoding concurrent requests together (batched prefill and steps).
import { randomInt } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import * as ort from 'onnxruntime-node';
import type { ChatTokenizer } from './chat.js';
import { IncrementalDetokenizer } from './detokenizer.js';
import { stackKv, type KvRow } from './kv.js';
import { int64, logitsRow, runGraph, type Graph } from './onnx-session.js';
import { acceptToken, completeSequence, type Sequence } from './onnx-sequence.js';
import type { OnnxModel, OnnxModelInfo } from './onnx-types.js';
import type { ChatMessage, GenerateOptions, GenerateRequest, GenerateResult } from './types.js';
import { InputTooLongError } from './errors.js';

/**
 * One loaded model. Concurrent generate calls are decoded together: one session.run per step for
 * every active sequence, left-padded to a common past length. New requests are prefilled together
 * (left-padded likewise), in chunks of at most prefillChunkTokens positions a run, and their caches
 * stacked into the batch; finished ones are dropped from it.
 */
export class OnnxChatModel implements OnnxModel {
  readonly canSnapshot = true;
  private waiting: Sequence[] = [];
  private active: Sequence[] = [];
  private past: ort.Tensor[] = [];
  private pastLength = 0;
  private loop: Promise<void> = Promise.resolve();
  private running = false;
  private closed = false;
  private disposed: Promise<void> | undefined;
  private largest = 0;

  constructor(
    readonly id: string,
    readonly info: OnnxModelInfo,
    private readonly session: ort.InferenceSession,
    private readonly graph: Graph,
    private readonly tokenizer: ChatTokenizer,
    private readonly defaults: { temperature: number; topP: number },
    private readonly maxBatch: number,
    private readonly prefillChunk: number,
    private readonly minStepMs: number,
  ) {}

  /** Values in the largest logits tensor a session.run has returned (see OnnxModel). */
  get largestLogits(): number {
    return this.largest;
  }

  countTokens(messages: ChatMessage[]): number {
    return this.tokenizer.encodeChat(messages).length;
  }

  async generate(req: GenerateRequest, opts: GenerateOptions = {}): Promise<GenerateResult> {
    if (this.closed) throw new Error(`model ${this.id} is disposed`);
    const prompt = this.tokenizer.encodeChat(req.messages);
    const room = this.info.maxContextTokens - prompt.length;
    if (room <= 0) {
      throw new InputTooLongError(
        `prompt has ${prompt.length} tokens; model ${this.id} has a context of ${this.info.maxContextTokens}`,
      );
    }
    const tokens = [...(req.resumeTokens ?? [])];
    const bad = tokens.find((t) => !Number.isInteger(t) || t < 0 || t >= this.info.vocabSize);
    if (bad !== undefined) throw new Error(`resumeTokens holds ${bad}, not a token id of model ${this.id}`);
    const detokenizer = new IncrementalDetokenizer((ids) => this.tokenizer.decode(ids));
    const text = tokens.map((t) => detokenizer.push(t)).join('');
    return new Promise<GenerateResult>((resolve, reject) => {
      const seq: Sequence = {
        prompt,
        tokens,
        maxOutput: Math.min(req.maxOutputTokens ?? Infinity, room),
        sampler: {
          temperature: req.temperature ?? this.defaults.temperature,
          topP: req.topP ?? this.defaults.topP,
          seed: req.seed ?? randomInt(2 ** 48 - 1),
        },
        detokenizer,
        text,
        opts,
        length: 0,
        resolve,
        reject,
      };
      if (tokens.length >= seq.maxOutput) {
        seq.finish = 'max_output_tokens';
        void completeSequence(seq);
        return;
      }
      this.waiting.push(seq);
      if (!this.running) this.loop = this.run();
    });
  }

  dispose(): Promise<void> {
    this.closed = true;
    this.disposed ??= this.loop.then(() => this.session.release());
    return this.disposed;
  }

  private async run(): Promise<void> {
    // `running` flips in the same synchronous stretch as the loop's exit test, so a request queued
    // by a continuation of a completed one can never find the loop finished but still flagged.
    this.running = true;
    try {
      while (this.waiting.length || this.active.length) {
        for (const seq of this.active) if (this.cancelled(seq)) seq.finish ??= 'cancelled';
        const started = performance.now();
        await this.retire();
        await this.dropCancelledWaiting();
        await this.admit();
        if (this.active.length) await this.decodeStep();
        const pause = started + this.minStepMs - performance.now();
        if (pause > 0) await sleep(pause);
      }
    } catch (error) {
      // A bug in the batching itself: fail every request rather than leave them hanging.
      for (const seq of [...this.active, ...this.waiting]) seq.reject(error);
      [this.active, this.waiting, this.past, this.pastLength] = [[], [], [], 0];
    } finally {
      this.running = false;
    }
  }

  private cancelled(seq: Sequence): boolean {
    return this.closed || (seq.opts.signal?.aborted ?? false);
  }

  /** Cancelled requests still waiting end now, not once the batch has room for them. */
  private async dropCancelledWaiting(): Promise<void> {
    const cancelled = this.waiting.filter((seq) => this.cancelled(seq));
    if (!cancelled.length) return;
    this.waiting = this.waiting.filter((seq) => !cancelled.includes(seq));
    for (const seq of cancelled) {
      seq.finish = 'cancelled';
      await completeSequence(seq);
    }
  }

  /**
   * Prefills waiting requests while the batch has room, then stacks their caches into it. Requests
   * that arrived together are prefilled together, in one session.run per chunk, and at most
   * `prefillChunk` of them, as a chunk holds at least one position of each.
   */
  private async admit(): Promise<void> {
    const joining: { seq: Sequence; row: KvRow }[] = [];
    while (this.waiting.length && this.active.length + joining.length < this.maxBatch) {
      const room = this.maxBatch - this.active.length - joining.length;
      const group = await this.takeGroup(Math.min(room, this.prefillChunk));
      if (!group.length) continue;
      try {
        const { logits, past } = await this.prefill(group);
        for (const [i, seq] of group.entries()) {
          await acceptToken(seq, logitsRow(logits, i, this.info.vocabSize), this.tokenizer.stopIds);
          if (seq.finish || seq.error) await completeSequence(seq);
          else joining.push({ seq, row: { tensors: past, row: i, length: seq.length } });
        }
      } catch (error) {
        for (const seq of group) {
          seq.error = error;
          await completeSequence(seq);
        }
      }
    }
    if (!joining.length) return;
    const rows = this.active.map((seq, row): KvRow => ({ tensors: this.past, row, length: seq.length }));
    ({ tensors: this.past, pastLength: this.pastLength } = stackKv([...rows, ...joining.map((j) => j.row)]));
    this.active.push(...joining.map((j) => j.seq));
  }

  /**
   * Up to `room` waiting requests to prefill together, oldest first; cancelled ones are completed
   * instead. The group stops where left padding would make up more than half of its tokens, so a
   * long prompt never makes short ones pay for its length.
   */
  private async takeGroup(room: number): Promise<Sequence[]> {
    const group: Sequence[] = [];
    let tokens = 0;
    let longest = 0;
    while (this.waiting.length && group.length < room) {
      const seq = this.waiting[0]!;
      // One cancelled while an earlier group was prefilled.
      if (this.cancelled(seq)) {
        await this.dropCancelledWaiting();
        continue;
      }
      const length = seq.prompt.length + seq.tokens.length;
      const width = Math.max(longest, length);
      if (group.length && width * (group.length + 1) > 2 * (tokens + length)) break;
      this.waiting.shift();
      group.push(seq);
      tokens += length;
      longest = width;
    }
    return group;
  }

  /** Completes finished sequences and drops their rows from the batch cache. */
  private async retire(): Promise<void> {
    const done = this.active.filter((seq) => seq.finish || seq.error);
    if (!done.length) return;
    const kept = this.active.flatMap((seq, row): { seq: Sequence; row: KvRow }[] =>
      seq.finish || seq.error ? [] : [{ seq, row: { tensors: this.past, row, length: seq.length } }],
    );
    this.active = kept.map((k) => k.seq);
    if (kept.length) ({ tensors: this.past, pastLength: this.pastLength } = stackKv(kept.map((k) => k.row)));
    else [this.past, this.pastLength] = [[], 0];
    for (const seq of done) await completeSequence(seq);
  }

  /**
   * Runs the prompts (and resumed tokens) of `group` through the model, left-padded to the longest,
   * feeding the cache forward from chunk to chunk as decode steps do. A run returns logits for
   * every position it is fed, though only each row's last one is used: chunks of `prefillChunk`
   * positions in all (shared out among the rows) bound them to prefillChunk x vocab values, where
   * a 4k-token prompt on a 150k vocabulary would otherwise be gigabytes. Returns the logits of each
   * row's last position, [group, vocab], and the group's cache, each row's valid positions last
   * (the layout stackKv reads).
   */
  private async prefill(group: Sequence[]): Promise<{ logits: ort.Tensor; past: ort.Tensor[] }> {
    const rows = group.map((seq) => [...seq.prompt, ...seq.tokens]);
    const width = Math.max(...rows.map((ids) => ids.length));
    const pad = (ids: number[]) => width - ids.length;
    const ids = rows.map((r) => [...new Array<number>(pad(r)).fill(0), ...r]);
    const mask = rows.map((r) => [
      ...new Array<number>(pad(r)).fill(0),
      ...new Array<number>(r.length).fill(1),
    ]);
    const positions = rows.map((r) => [...new Array<number>(pad(r)).fill(0), ...r.map((_, i) => i)]);
    const { numKeyValueHeads, headDim, kvType } = this.graph;
    const empty = kvType === 'float16' ? new Uint16Array(0) : new Float32Array(0);
    let past: ort.Tensor[] = this.graph.pastNames.map(
      () => new ort.Tensor(kvType, empty, [group.length, numKeyValueHeads, 0, headDim]),
    );
    const chunk = Math.max(1, Math.floor(this.prefillChunk / group.length));
    let logits: ort.Tensor | undefined;
    for (let start = 0; start < width; start += chunk) {
      const end = Math.min(width, start + chunk);
      const columns = (m: number[][], from: number) => m.flatMap((r) => r.slice(from, end));
      const out = await this.runModel(
        int64(columns(ids, start), [group.length, end - start]),
        int64(columns(mask, 0), [group.length, end]),
        int64(columns(positions, start), [group.length, end - start]),
        past,
        start > 0,
      );
      logits = out.logits;
      past = out.present;
    }
    group.forEach((seq, i) => (seq.length = rows[i]!.length));
    return { logits: lastPositions(logits!), past };
  }

  /** One session.run, noting the size of the logits it returned. */
  private async runModel(
    inputIds: ort.Tensor,
    attentionMask: ort.Tensor,
    positionIds: ort.Tensor,
    past: ort.Tensor[],
    hasPast: boolean,
  ): ReturnType<typeof runGraph> {
    const out = await runGraph(this.session, this.graph, inputIds, attentionMask, positionIds, past, hasPast);
    this.largest = Math.max(this.largest, out.logits.size);
    return out;
  }

  /** One token for every active sequence in a single session.run. */
  private async decodeStep(): Promise<void> {
    const batch = this.active;
    const total = this.pastLength + 1;
    // Written straight into the int64 buffers: the mask alone is batch x context values a step,
    // and a BigInt per value was a tenth of a 16-sequence step.
    const ids = new BigInt64Array(batch.length);
    const positions = new BigInt64Array(batch.length);
    const mask = new BigInt64Array(batch.length * total);
    batch.forEach((seq, row) => {
      ids[row] = BigInt(seq.tokens[seq.tokens.length - 1]!);
      positions[row] = BigInt(seq.length);
      mask.fill(1n, row * total + total - seq.length - 1, (row + 1) * total);
    });
    let out: { logits: ort.Tensor; present: ort.Tensor[] };
    try {
      out = await this.runModel(
        new ort.Tensor('int64', ids, [batch.length, 1]),
        new ort.Tensor('int64', mask, [batch.length, total]),
        new ort.Tensor('int64', positions, [batch.length, 1]),
        this.past,
        true,
      );
    } catch (error) {
      for (const seq of batch) seq.error = error;
      return;
    }
    this.past = out.present;
    this.pastLength = total;
    await Promise.all(
      batch.map((seq, row) => {
        seq.length += 1;
        return acceptToken(seq, logitsRow(out.logits, row, this.info.vocabSize), this.tokenizer.stopIds);
      }),
    );
  }
}

/**
 * The logits of each row's last position, [rows, vocab], copied out of [rows, positions, vocab],
 * so the last chunk's logits are not held while the rows' first tokens are sampled and reported.
 */
function lastPositions(logits: ort.Tensor): ort.Tensor {
  const [rows, positions, vocab] = logits.dims as [number, number, number];
  const data = logits.data as Float32Array | Uint16Array;
  const Data = data.constructor as new (length: number) => Float32Array | Uint16Array;
  const last = new Data(rows * vocab);
  for (let row = 0; row < rows; row++) {
    const from = (row * positions + positions - 1) * vocab;
    last.set(data.subarray(from, from + vocab), row * vocab);
  }
  return new ort.Tensor(logits.type, last, [rows, vocab]);
}
