// A backend without a model, for benchmarks of everything around generation.
import { setTimeout as sleep } from 'node:timers/promises';
import type { ChatMessage, GenerateOptions, GenerateRequest, GenerateResult, ModelBackend } from './types.js';

export interface InstantBackendOptions {
  /** Default 'instant'. */
  id?: string;
  /** Tokens every generation emits before it stops. Default 16. */
  outputTokens?: number;
  /** Least time per token, in ms, as OnnxModelOptions.minStepMs. Default 0. */
  minStepMs?: number;
}

const WORDS = [
  'lorem',
  ' ipsum',
  ' dolor',
  ' sit',
  ' amet',
  ',',
  ' consectetur',
  ' adipiscing',
  ' elit',
  '.',
];

/**
 * A backend without a model, for benchmarks of everything around generation: every request
 * emits the same `outputTokens` tokens (token i is WORDS[i % 10], its id i % 10) as fast as the
 * callbacks allow, then stops. It honours resumeTokens, maxOutputTokens and the abort signal like
 * a real backend; countTokens is a characters/4 estimate.
 */
export function createInstantBackend(opts: InstantBackendOptions = {}): ModelBackend {
  const total = opts.outputTokens ?? 16;
  const countTokens = (messages: ChatMessage[]): number =>
    messages.reduce((sum, m) => sum + Math.ceil(m.content.length / 4) + 1, 0);
  return {
    id: opts.id ?? 'instant',
    canSnapshot: true,
    countTokens,
    async generate(req: GenerateRequest, { signal, onStep }: GenerateOptions = {}): Promise<GenerateResult> {
      const tokens = [...(req.resumeTokens ?? [])];
      const limit = Math.min(total, req.maxOutputTokens ?? Infinity);
      let finishReason: GenerateResult['finishReason'] =
        tokens.length >= total ? 'stop' : 'max_output_tokens';
      while (tokens.length < limit) {
        if (signal?.aborted) {
          finishReason = 'cancelled';
          break;
        }
        const id = tokens.length % WORDS.length;
        tokens.push(id);
        await onStep?.({ tokens: [id], text: WORDS[id]! });
        if (opts.minStepMs) await sleep(opts.minStepMs);
        if (tokens.length === total) finishReason = 'stop';
      }
      return {
        text: tokens.map((id) => WORDS[id]).join(''),
        tokens,
        inputTokens: countTokens(req.messages),
        outputTokens: tokens.length,
        finishReason,
      };
    },
    async dispose() {},
  };
}
