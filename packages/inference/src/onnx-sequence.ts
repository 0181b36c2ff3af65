/** One generate call inside the batch: its state, how it takes a sampled token and how it settles. */
import type { IncrementalDetokenizer } from './detokenizer.js';
import { sampleToken, type Sampler } from './sampling.js';
import type { FinishReason, GenerateOptions, GenerateResult } from './types.js';

export interface Sequence {
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

/** Samples the sequence's next token from its logits and reports it. */
export async function acceptToken(
  seq: Sequence,
  logits: ArrayLike<number>,
  stopIds: ReadonlySet<number>,
): Promise<void> {
  const token = sampleToken(logits, seq.sampler, seq.tokens.length);
  if (stopIds.has(token)) {
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

/** Settles the sequence's generate call with its result or its error. */
export async function completeSequence(seq: Sequence): Promise<void> {
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
