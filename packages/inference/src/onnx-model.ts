/**
 * Loads a Hugging Face ONNX export: the directory's files (onnx-files), the session and its graph
 * layout (onnx-session), then the batched decoder over them (onnx-batch).
 */
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as ort from 'onnxruntime-node';
import { OnnxChatModel } from './onnx-batch.js';
import { loadChatTokenizer, locateFiles, positiveInt } from './onnx-files.js';
import { describeGraph, sessionOptions } from './onnx-session.js';
import type { OnnxModel, OnnxModelInfo, OnnxModelOptions } from './onnx-types.js';

export { estimateOnnxModelBytes, loadChatTokenizer } from './onnx-files.js';
export type { ExecutionProvider, OnnxModel, OnnxModelInfo, OnnxModelOptions } from './onnx-types.js';

/** models/tiny-chat in this repository: a tiny real chat model, the default for tests and development. */
export const DEFAULT_MODEL_DIR = fileURLToPath(new URL('../../../models/tiny-chat', import.meta.url));

/** Loads a Hugging Face ONNX export (decoder with past) and its tokenizer from a directory. */
export async function loadOnnxModel(
  dir: string = DEFAULT_MODEL_DIR,
  opts: OnnxModelOptions = {},
): Promise<OnnxModel> {
  const prefillChunkTokens = opts.prefillChunkTokens ?? 512;
  // A chunk of no positions would never end a prefill.
  if (!positiveInt(prefillChunkTokens))
    throw new Error(`prefillChunkTokens must be an integer of at least 1, not ${prefillChunkTokens}`);
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
      prefillChunkTokens,
      opts.minStepMs ?? 0,
    );
  } catch (error) {
    await session.release();
    throw error;
  }
}
