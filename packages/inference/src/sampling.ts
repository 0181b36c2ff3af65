// Token sampling: seeded, reproducible on resume; greedy at temperature 0.
export interface Sampler {
  temperature: number;
  topP: number;
  seed: number;
}

function mix32(h: number): number {
  // murmur3's finaliser: a cheap bijective avalanche on 32 bits.
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * A uniform draw in [0, 1) that depends only on (seed, index): resuming at token i reproduces the
 * draws an uninterrupted run would have made, with no RNG state to carry over.
 */
export function uniformAt(seed: number, index: number): number {
  const s = Math.floor(seed);
  const lo = s >>> 0;
  const hi = Math.floor(s / 2 ** 32) >>> 0;
  const a = mix32(mix32(lo ^ 0x9e3779b9) ^ mix32(hi + 0x7f4a7c15) ^ mix32(index + 0x632be59b));
  const b = mix32(a ^ 0x94d049bb);
  return ((a >>> 5) * 2 ** 26 + (b >>> 6)) / 2 ** 53;
}

let scratch = new Float64Array(0);

function argmax(logits: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i;
  return best;
}

/** Picks the next token from one row of logits; greedy when temperature is 0. */
export function sampleToken(logits: ArrayLike<number>, sampler: Sampler, index: number): number {
  if (sampler.temperature <= 0) return argmax(logits);
  const n = logits.length;
  const max = logits[argmax(logits)]!;
  // One buffer for every draw (they are synchronous): a batch step samples each of its rows.
  if (scratch.length < n) scratch = new Float64Array(n);
  const weights = scratch.subarray(0, n);
  let total = 0;
  for (let i = 0; i < n; i++) {
    weights[i] = Math.exp((logits[i]! - max) / sampler.temperature);
    total += weights[i]!;
  }
  const u = uniformAt(sampler.seed, index);
  if (sampler.topP >= 1) return drawInOrder(weights, null, total * u);

  // The nucleus is the shortest prefix of tokens sorted by weight whose mass reaches topP. Every
  // candidate set {w >= t} is such a prefix, so once one holds enough mass only it needs sorting.
  const need = sampler.topP * total;
  let threshold = 1; // the maximum weight is exactly 1
  let candidates: number[];
  for (;;) {
    candidates = [];
    let mass = 0;
    for (let i = 0; i < n; i++) {
      if (weights[i]! >= threshold) {
        candidates.push(i);
        mass += weights[i]!;
      }
    }
    if (mass >= need || threshold === 0) break;
    threshold = threshold < 1e-30 ? 0 : threshold / 16;
  }
  candidates.sort((a, b) => weights[b]! - weights[a]! || a - b);
  let kept = 0;
  let mass = 0;
  while (kept < candidates.length && mass < need) mass += weights[candidates[kept++]!]!;
  return drawInOrder(weights, candidates.slice(0, kept), mass * u);
}

/** Walks `order` (null: every token by id) until the running weight passes target. */
function drawInOrder(weights: Float64Array, order: number[] | null, target: number): number {
  const count = order ? order.length : weights.length;
  let acc = 0;
  let last = 0;
  for (let k = 0; k < count; k++) {
    const i = order ? order[k]! : k;
    if (weights[i]! === 0) continue;
    last = i;
    acc += weights[i]!;
    if (acc > target) return i;
  }
  // Rounding can leave target a hair above the last partial sum.
  return last;
}
