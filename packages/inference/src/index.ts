/**
 * @taskline/inference: chat generation for workers. loadOnnxModel serves a Hugging Face ONNX
 * export (decoder with past, e.g. from Optimum) with batched KV-cache decoding and a chunked
 * prefill (its logits bounded by prefillChunkTokens), and
 * loadOnnxModelInThread the same in a worker thread, off the event loop; ModelCache keeps
 * loaded models within a memory budget; createInstantBackend stands in for a model in benchmarks.
 */
export type {
  ChatMessage,
  FinishReason,
  GenerateOptions,
  GenerateRequest,
  GenerateResult,
  GenerateStep,
  ModelBackend,
  SamplingOptions,
} from './types.js';
export {
  DEFAULT_MODEL_DIR,
  estimateOnnxModelBytes,
  loadOnnxModel,
  type ExecutionProvider,
  type OnnxModel,
  type OnnxModelInfo,
  type OnnxModelOptions,
} from './onnx-model.js';
export { InputTooLongError, InvalidRequestError, ModelThreadDiedError } from './errors.js';
export { loadOnnxModelInThread } from './model-thread.js';
export { ModelCache, type ModelCacheOptions, type ModelLease } from './model-cache.js';
export { createInstantBackend, type InstantBackendOptions } from './instant.js';
