/** The ONNX loader's options and what a loaded model reports; shared by the loader, its batch and its thread. */
import type { ModelBackend } from './types.js';

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
  /**
   * Positions one prefill session.run is fed, every prompt prefilled together counted (no more
   * prompts than this are prefilled together): the run's logits, one row of the vocabulary per
   * position, are at most this many rows. Default 512.
   */
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
  /**
   * Values (rows x positions x vocab) in the largest logits tensor a session.run of this model has
   * returned: at most prefillChunkTokens x vocab for a prefill, the batch's rows x vocab for a
   * decode step. A model in its own thread reports it as of the last generation that ended.
   */
  readonly largestLogits: number;
}
