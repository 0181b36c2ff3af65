import { randomInt } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { access, stat } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as ort from 'onnxruntime-node';
import { ChatTokenizer, readJson } from './chat.js';
import { IncrementalDetokenizer } from './detokenizer.js';
import { stackKv, type KvRow } from './kv.js';
import { sampleToken, type Sampler } from './sampling.js';
import type {
  ChatMessage,
  FinishReason,
  GenerateOptions,
  GenerateRequest,
  GenerateResult,
  ModelBackend,
} from './types.js';

/** models/tiny-chat in this repository: a tiny real chat model, the default for tests and development. */
export const DEFAULT_MODEL_DIR = fileURLToPath(new URL('../../../models/tiny-chat', import.meta.url));

export type ExecutionProvider = 'cpu' | 'cuda';

export interface OnnxModelOptions {
  /** Default: the directory's name. */
  id?: string;
  /** Default ['cpu']. 'cuda' needs the CUDA build of onnxruntime-node (the GPU image installs it). */
  executionProviders?: ExecutionProvider[];
  /** Default: onnxruntime's choice (one per core). */
  intraOpThreads?: number;
  /** Most sequences decoded together in one step; more requests wait. Default 16. */
  maxBatch?: number;
  /** Prompt plus output limit. Default and maximum: config.json's max_position_embeddings. */
  maxContextTokens?: number;
  /** Prompts are prefilled in chunks of this many tokens, which bounds the logits buffer. Default 512. */
  prefillChunkTokens?: number;
  /**
   * Lower bound on one decode step, in ms: 0 (the default) in production; tests and demos raise it
   * so a fast model's generation lasts long enough to be cancelled, killed or drained midway.
   */
  minStepMs?: number;
}

export interface OnnxModelInfo {
  dir: string;
  modelFile: string;
  numLayers: number;
  numKeyValueHeads: number;
  headDim: number;
  vocabSize: number;
  maxContextTokens: number;
  stopTokenIds: number[];
  executionProviders: ExecutionProvider[];
}

export interface OnnxModel extends ModelBackend {
  readonly info: OnnxModelInfo;
}

/** Where Optimum and transformers.js exports put the decoder-with-past graph. */
const MODEL_FILES = ['model.onnx', 'onnx/model.onnx', 'decoder_model_merged.onnx'];
const REQUIRED_FILES = ['config.json', 'tokenizer.json', 'tokenizer_config.json'];

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

async function locateFiles(dir: string): Promise<string> {
  const missing = [];
  for (const file of REQUIRED_FILES) if (!(await exists(join(dir, file)))) missing.push(file);
  let modelFile: string | undefined;
  for (const file of MODEL_FILES) {
    if (await exists(join(dir, file))) {
      modelFile = file;
      break;
    }
  }
  if (!modelFile) missing.push(MODEL_FILES.join(' or '));
  if (missing.length) {
    throw new Error(
      `model directory ${dir} is missing ${missing.join(', ')} (expected a Hugging Face ONNX export)`,
    );
  }
  return modelFile!;
}

function positiveInt(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value > 0 ? value : undefined;
}

/**
 * Bytes a loaded model is expected to hold, for ModelCache budgets: its weight files plus a full
 * KV cache (maxBatch sequences of maxContextTokens; 4096 positions when neither config.json nor
 * the options bound the context).
 */
export async function estimateOnnxModelBytes(
  dir: string,
  opts: Pick<OnnxModelOptions, 'maxBatch' | 'maxContextTokens'> = {},
): Promise<number> {
  const modelFile = await locateFiles(dir);
  let bytes = 0;
  for (const file of [modelFile, `${modelFile}_data`, `${modelFile}.data`]) {
    if (await exists(join(dir, file))) bytes += (await stat(join(dir, file))).size;
  }
  const config = await readJson(join(dir, 'config.json'));
  const heads = positiveInt(config.num_attention_heads) ?? 1;
  const kvHeads = positiveInt(config.num_key_value_heads) ?? heads;
  const headDim = positiveInt(config.head_dim) ?? Math.ceil((positiveInt(config.hidden_size) ?? 0) / heads);
  const context = Math.min(
    opts.maxContextTokens ?? Infinity,
    positiveInt(config.max_position_embeddings) ?? opts.maxContextTokens ?? 4096,
  );
  const elementBytes = config.torch_dtype === 'float16' || config.torch_dtype === 'bfloat16' ? 2 : 4;
  const layers = positiveInt(config.num_hidden_layers) ?? 0;
  return bytes + layers * 2 * kvHeads * headDim * context * (opts.maxBatch ?? 16) * elementBytes;
}

/** onnxruntime session options for the loader's options. */
export function sessionOptions(
  opts: Pick<OnnxModelOptions, 'executionProviders' | 'intraOpThreads'>,
): ort.InferenceSession.SessionOptions {
  return {
    executionProviders: opts.executionProviders ?? ['cpu'],
    graphOptimizationLevel: 'all',
    ...(opts.intraOpThreads ? { intraOpNumThreads: opts.intraOpThreads } : {}),
  };
}

interface Graph {
  pastNames: string[];
  presentNames: string[];
  kvType: 'float32' | 'float16';
  numKeyValueHeads: number;
  headDim: number;
  hasPositionIds: boolean;
  hasUseCacheBranch: boolean;
}

/** Reads the decoder-with-past layout off the session, falling back on config.json for dimensions. */
function describeGraph(session: ort.InferenceSession, config: Record<string, unknown>, file: string): Graph {
  const inputs = new Set(session.inputNames);
  const outputs = new Set(session.outputNames);
  const numLayers = session.inputNames.filter((n) => /^past_key_values\.\d+\.key$/.test(n)).length;
  const pastNames: string[] = [];
  const presentNames: string[] = [];
  for (let i = 0; i < numLayers; i++) {
    for (const kind of ['key', 'value']) {
      pastNames.push(`past_key_values.${i}.${kind}`);
      presentNames.push(`present.${i}.${kind}`);
    }
  }
  const absent = [
    ...['input_ids', 'attention_mask', ...pastNames].filter((n) => !inputs.has(n)),
    ...['logits', ...presentNames].filter((n) => !outputs.has(n)),
  ];
  if (numLayers === 0 || absent.length) {
    throw new Error(
      `${file} is not a decoder with past key values (Optimum layout)` +
        (absent.length ? `: missing ${absent.join(', ')}` : ': no past_key_values.* inputs'),
    );
  }
  const meta = session.inputMetadata.find((m) => m.name === pastNames[0]);
  const kvType = meta?.isTensor ? meta.type : 'float32';
  if (kvType !== 'float32' && kvType !== 'float16')
    throw new Error(`${file}: unsupported KV cache type ${kvType}`);
  const shape = meta?.isTensor ? meta.shape : [];
  const heads = positiveInt(config.num_attention_heads);
  const numKeyValueHeads = positiveInt(shape[1]) ?? positiveInt(config.num_key_value_heads) ?? heads;
  const hidden = positiveInt(config.hidden_size);
  const headDim =
    positiveInt(shape[3]) ?? positiveInt(config.head_dim) ?? (hidden && heads ? hidden / heads : undefined);
  if (!numKeyValueHeads || !headDim)
    throw new Error(`${file}: cannot tell the KV cache shape from the graph or config.json`);
  return {
    pastNames,
    presentNames,
    kvType,
    numKeyValueHeads,
    headDim,
    hasPositionIds: inputs.has('position_ids'),
    hasUseCacheBranch: inputs.has('use_cache_branch'),
  };
}

function float16ToFloat32(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * 2 ** -14 * (fraction / 1024);
  if (exponent === 0x1f) return fraction ? NaN : sign * Infinity;
  return sign * 2 ** (exponent - 15) * (1 + fraction / 1024);
}

/** Row `row` of [rows, vocab] logits as numbers (float16 logits come as raw bits). */
function logitsRow(logits: ort.Tensor, row: number, vocab: number): ArrayLike<number> {
  const data = logits.data as Float32Array | Uint16Array;
  const slice = data.subarray(row * vocab, (row + 1) * vocab);
  return logits.type === 'float16' ? Float32Array.from(slice, float16ToFloat32) : slice;
}

function int64(values: number[], dims: number[]): ort.Tensor {
  return new ort.Tensor('int64', BigInt64Array.from(values, BigInt), dims);
}

interface Sequence {
  prompt: number[];
  /** Output tokens so far, resumed ones first; never a stop token. */
  tokens: number[];
  maxOutput: number;
  sampler: Sampler;
  detokenizer: IncrementalDetokenizer;
  text: string;
  opts: GenerateOptions;
  /** Positions held in the KV cache. */
  length: number;
  finish?: FinishReason;
  error?: unknown;
  resolve: (result: GenerateResult) => void;
  reject: (error: unknown) => void;
}

/**
 * One loaded model. Concurrent generate calls are decoded together: one session.run per step for
 * every active sequence, left-padded to a common past length. New requests are prefilled together
 * (left-padded likewise) and their caches stacked into the batch; finished ones are dropped from it.
 */
class OnnxChatModel implements OnnxModel {
  readonly canSnapshot = true;
  private waiting: Sequence[] = [];
  private active: Sequence[] = [];
  private past: ort.Tensor[] = [];
  private pastLength = 0;
  private loop: Promise<void> = Promise.resolve();
  private running = false;
  private closed = false;
  private disposed: Promise<void> | undefined;

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

  countTokens(messages: ChatMessage[]): number {
    return this.tokenizer.encodeChat(messages).length;
  }

  async generate(req: GenerateRequest, opts: GenerateOptions = {}): Promise<GenerateResult> {
    if (this.closed) throw new Error(`model ${this.id} is disposed`);
    const prompt = this.tokenizer.encodeChat(req.messages);
    const room = this.info.maxContextTokens - prompt.length;
    if (room <= 0) {
      throw new Error(
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
        void this.complete(seq);
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
        for (const seq of this.active)
          if (this.closed || seq.opts.signal?.aborted) seq.finish ??= 'cancelled';
        const started = performance.now();
        await this.retire();
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

  /**
   * Prefills waiting requests while the batch has room, then stacks their caches into it. Requests
   * that arrived together are prefilled together, in one session.run per chunk.
   */
  private async admit(): Promise<void> {
    const joining: { seq: Sequence; row: KvRow }[] = [];
    while (this.waiting.length && this.active.length + joining.length < this.maxBatch) {
      const group = await this.takeGroup(this.maxBatch - this.active.length - joining.length);
      if (!group.length) continue;
      try {
        const { logits, past } = await this.prefill(group);
        const width = logits.dims[1]!;
        for (const [i, seq] of group.entries()) {
          await this.accept(seq, logitsRow(logits, i * width + width - 1, this.info.vocabSize));
          if (seq.finish || seq.error) await this.complete(seq);
          else joining.push({ seq, row: { tensors: past, row: i, length: seq.length } });
        }
      } catch (error) {
        for (const seq of group) {
          seq.error = error;
          await this.complete(seq);
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
      if (this.closed || seq.opts.signal?.aborted) {
        this.waiting.shift();
        seq.finish = 'cancelled';
        await this.complete(seq);
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
    for (const seq of done) await this.complete(seq);
  }

  /**
   * Runs the prompts (and resumed tokens) of `group` through the model, left-padded to the longest
   * and in chunks of `prefillChunk` positions: logits [group, chunk, vocab] of the last chunk, and
   * the group's cache, each row's valid positions last (the layout stackKv reads).
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
    let logits: ort.Tensor | undefined;
    for (let start = 0; start < width; start += this.prefillChunk) {
      const end = Math.min(width, start + this.prefillChunk);
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
    return { logits: logits!, past };
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
        return this.accept(seq, logitsRow(out.logits, row, this.info.vocabSize));
      }),
    );
  }

  private async runModel(
    inputIds: ort.Tensor,
    attentionMask: ort.Tensor,
    positionIds: ort.Tensor,
    past: ort.Tensor[],
    hasPast: boolean,
  ): Promise<{ logits: ort.Tensor; present: ort.Tensor[] }> {
    const feeds: Record<string, ort.Tensor> = { input_ids: inputIds, attention_mask: attentionMask };
    if (this.graph.hasPositionIds) feeds.position_ids = positionIds;
    // Optimum's merged decoders switch between their no-past and with-past subgraphs on this flag.
    if (this.graph.hasUseCacheBranch) feeds.use_cache_branch = new ort.Tensor('bool', [hasPast], [1]);
    this.graph.pastNames.forEach((name, i) => (feeds[name] = past[i]!));
    const out = await this.session.run(feeds);
    return { logits: out.logits!, present: this.graph.presentNames.map((name) => out[name]!) };
  }

  /** Samples the sequence's next token from its logits and reports it. */
  private async accept(seq: Sequence, logits: ArrayLike<number>): Promise<void> {
    const token = sampleToken(logits, seq.sampler, seq.tokens.length);
    if (this.tokenizer.stopIds.has(token)) {
      seq.finish = 'stop';
      return;
    }
    seq.tokens.push(token);
    const text = seq.detokenizer.push(token);
    seq.text += text;
    if (seq.tokens.length >= seq.maxOutput) seq.finish = 'max_output_tokens';
    try {
      await seq.opts.onStep?.({ tokens: [token], text });
    } catch (error) {
      seq.error = error;
    }
  }

  private async complete(seq: Sequence): Promise<void> {
    if (seq.error) return seq.reject(seq.error);
    // Only a finished turn releases held-back bytes: after a limit or a cancel the tokens may be
    // resumed, and the next delta must then start with the completed character.
    const tail = seq.finish === 'stop' ? seq.detokenizer.flush() : '';
    if (tail) {
      seq.text += tail;
      try {
        await seq.opts.onStep?.({ tokens: [], text: tail });
      } catch (error) {
        return seq.reject(error);
      }
    }
    seq.resolve({
      text: seq.text,
      tokens: seq.tokens,
      inputTokens: seq.prompt.length,
      outputTokens: seq.tokens.length,
      finishReason: seq.finish!,
    });
  }
}

/** A model directory's chat tokenizer, with the configs it was read from. */
export async function loadChatTokenizer(dir: string): Promise<{
  config: Record<string, unknown>;
  generationConfig: Record<string, unknown>;
  tokenizer: ChatTokenizer;
}> {
  const config = await readJson(join(dir, 'config.json'));
  const generationConfig = (await exists(join(dir, 'generation_config.json')))
    ? await readJson(join(dir, 'generation_config.json'))
    : {};
  return { config, generationConfig, tokenizer: await ChatTokenizer.load(dir, config, generationConfig) };
}

/** Loads a Hugging Face ONNX export (decoder with past) and its tokenizer from a directory. */
export async function loadOnnxModel(
  dir: string = DEFAULT_MODEL_DIR,
  opts: OnnxModelOptions = {},
): Promise<OnnxModel> {
  const modelFile = await locateFiles(dir);
  const { config, generationConfig, tokenizer } = await loadChatTokenizer(dir);
  const executionProviders = opts.executionProviders ?? ['cpu'];
  const session = await ort.InferenceSession.create(join(dir, modelFile), sessionOptions(opts)).catch(
    (error: Error) => {
      throw new Error(
        `${join(dir, modelFile)}: no onnxruntime session with providers [${executionProviders.join(', ')}]` +
          ` (cuda needs the CUDA build of onnxruntime-node): ${error.message}`,
        { cause: error },
      );
    },
  );
  try {
    const graph = describeGraph(session, config, join(dir, modelFile));
    const logitsMeta = session.outputMetadata.find((m) => m.name === 'logits');
    const vocabSize =
      positiveInt(logitsMeta?.isTensor ? logitsMeta.shape[2] : undefined) ?? positiveInt(config.vocab_size);
    if (!vocabSize) throw new Error(`${dir}: config.json has no vocab_size`);
    const contextLimit = positiveInt(config.max_position_embeddings) ?? Infinity;
    const maxContextTokens = Math.min(opts.maxContextTokens ?? contextLimit, contextLimit);
    if (!Number.isFinite(maxContextTokens)) {
      throw new Error(`${dir}: config.json has no max_position_embeddings; pass maxContextTokens`);
    }
    const sampling = generationConfig.do_sample === true;
    const info: OnnxModelInfo = {
      dir: resolve(dir),
      modelFile,
      numLayers: graph.pastNames.length / 2,
      numKeyValueHeads: graph.numKeyValueHeads,
      headDim: graph.headDim,
      vocabSize,
      maxContextTokens,
      stopTokenIds: [...tokenizer.stopIds],
      executionProviders,
    };
    return new OnnxChatModel(
      opts.id ?? basename(resolve(dir)),
      info,
      session,
      graph,
      tokenizer,
      {
        temperature: sampling ? ((generationConfig.temperature as number | undefined) ?? 1) : 0,
        topP: sampling ? ((generationConfig.top_p as number | undefined) ?? 1) : 1,
      },
      opts.maxBatch ?? 16,
      opts.prefillChunkTokens ?? 512,
      opts.minStepMs ?? 0,
    );
  } catch (error) {
    await session.release();
    throw error;
  }
}
