/** The onnxruntime session of a decoder with past: its options, its input/output layout and one run. */
import * as ort from 'onnxruntime-node';
import { positiveInt } from './onnx-files.js';
import type { OnnxModelOptions } from './onnx-types.js';

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

export interface Graph {
  pastNames: string[];
  presentNames: string[];
  kvType: 'float32' | 'float16';
  numKeyValueHeads: number;
  headDim: number;
  hasPositionIds: boolean;
  hasUseCacheBranch: boolean;
}

/** Reads the decoder-with-past layout off the session, falling back on config.json for dimensions. */
export function describeGraph(
  session: ort.InferenceSession,
  config: Record<string, unknown>,
  file: string,
): Graph {
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
export function logitsRow(logits: ort.Tensor, row: number, vocab: number): ArrayLike<number> {
  const data = logits.data as Float32Array | Uint16Array;
  const slice = data.subarray(row * vocab, (row + 1) * vocab);
  return logits.type === 'float16' ? Float32Array.from(slice, float16ToFloat32) : slice;
}

export function int64(values: number[], dims: number[]): ort.Tensor {
  return new ort.Tensor('int64', BigInt64Array.from(values, BigInt), dims);
}

/** One session.run of the decoder: `past` holds one tensor per past input, `hasPast` whether it is non-empty. */
export async function runGraph(
  session: ort.InferenceSession,
  graph: Graph,
  inputIds: ort.Tensor,
  attentionMask: ort.Tensor,
  positionIds: ort.Tensor,
  past: ort.Tensor[],
  hasPast: boolean,
): Promise<{ logits: ort.Tensor; present: ort.Tensor[] }> {
  const feeds: Record<string, ort.Tensor> = { input_ids: inputIds, attention_mask: attentionMask };
  if (graph.hasPositionIds) feeds.position_ids = positionIds;
  // Optimum's merged decoders switch between their no-past and with-past subgraphs on this flag.
  if (graph.hasUseCacheBranch) feeds.use_cache_branch = new ort.Tensor('bool', [hasPast], [1]);
  graph.pastNames.forEach((name, i) => (feeds[name] = past[i]!));
  const out = await session.run(feeds);
  return { logits: out.logits!, present: graph.presentNames.map((name) => out[name]!) };
}
