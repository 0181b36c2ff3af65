// The inference types: chat messages, sampling options, generate requests, steps and results.
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface SamplingOptions {
  /** Upper bound on output tokens, counting `resumeTokens`. Default: the rest of the context window. */
  maxOutputTokens?: number;
  /** 0 = greedy. Default: the model's generation_config.json when it samples, else greedy. */
  temperature?: number;
  /** Nucleus sampling mass in (0, 1]. Default: generation_config.json's top_p, else 1. */
  topP?: number;
  /**
   * Seed of the sampler. The draw for output token i depends only on (seed, i), so a run resumed
   * with the same seed continues exactly like an uninterrupted one. Default: a random seed.
   */
  seed?: number;
}

export interface GenerateRequest extends SamplingOptions {
  messages: ChatMessage[];
  /** Tokens an earlier attempt already generated (GenerateResult.tokens / GenerateStep.tokens): continue after them. */
  resumeTokens?: number[];
}

export interface GenerateStep {
  /** Token ids produced by this step. */
  tokens: number[];
  /** Text delta; the concatenation of every delta (after the resumed text) is the final text. */
  text: string;
}

export type FinishReason = 'stop' | 'max_output_tokens' | 'cancelled';

export interface GenerateResult {
  /**
   * The whole generated text, including the part that `resumeTokens` stand for. Unless the model
   * ended its turn ('stop'), bytes of a character still incomplete at the end are left out: they
   * open the first delta of a run resumed from `tokens`.
   */
  text: string;
  /** The whole generated token ids, `resumeTokens` first; stop tokens are not included. */
  tokens: number[];
  /** Prompt tokens (the chat template applied to the messages). */
  inputTokens: number;
  /** Equals tokens.length. */
  outputTokens: number;
  finishReason: FinishReason;
}

export interface GenerateOptions {
  /** Checked every decoding step: an abort ends the generation within one step, as 'cancelled'. */
  signal?: AbortSignal;
  /**
   * Called for every step, in order. A model in process awaits a returned promise before its next
   * decoding step, which holds back every request batched with this one: keep it short. A model
   * in its own thread (loadOnnxModelInThread) runs ahead of it. If it throws, the generation
   * fails with that error.
   */
  onStep?: (step: GenerateStep) => void | Promise<void>;
}

/** What a worker needs from any backend. */
export interface ModelBackend {
  readonly id: string;
  /** Whether generate honours `resumeTokens`, so a task can be checkpointed and resumed. */
  readonly canSnapshot: boolean;
  /** True once the backend can serve nothing more (its model thread died): a cache loads it anew. */
  readonly broken?: boolean;
  generate(req: GenerateRequest, opts?: GenerateOptions): Promise<GenerateResult>;
  countTokens(messages: ChatMessage[]): number;
  dispose(): Promise<void>;
}
