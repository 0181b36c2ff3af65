// KV cache rows: building a batch cache from rows of other caches.
import * as ort from 'onnxruntime-node';

type KvArray = Float32Array | Uint16Array;

/** One sequence's cache inside a set of [batch, heads, past, head_dim] tensors (one per past input). */
export interface KvRow {
  tensors: readonly ort.Tensor[];
  row: number;
  /** Valid positions: the last `length` of the tensors' past axis, the rest is left padding. */
  length: number;
}

/**
 * Builds a batch cache from rows of other caches, left-padding each to the longest row. Used when
 * sequences join or leave the batch; padding is zero-filled (it must stay finite, as masked
 * attention multiplies it by zero) and hidden from the model by attention_mask.
 */
export function stackKv(rows: readonly KvRow[]): { tensors: ort.Tensor[]; pastLength: number } {
  const pastLength = Math.max(0, ...rows.map((r) => r.length));
  const count = rows[0]!.tensors.length;
  const tensors: ort.Tensor[] = [];
  for (let t = 0; t < count; t++) {
    const first = rows[0]!.tensors[t]!;
    const [, heads, , headDim] = first.dims as [number, number, number, number];
    const Data = (first.data as KvArray).constructor as new (length: number) => KvArray;
    const out = new Data(rows.length * heads * pastLength * headDim);
    rows.forEach((r, b) => {
      const src = r.tensors[t]!;
      const srcPast = src.dims[2]!;
      const data = src.data as KvArray;
      for (let h = 0; h < heads; h++) {
        const from = ((r.row * heads + h) * srcPast + srcPast - r.length) * headDim;
        const to = ((b * heads + h) * pastLength + pastLength - r.length) * headDim;
        out.set(data.subarray(from, from + r.length * headDim), to);
      }
    });
    tensors.push(new ort.Tensor(first.type, out, [rows.length, heads, pastLength, headDim]));
  }
  return { tensors, pastLength };
}
