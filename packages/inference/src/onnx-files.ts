/** A model directory on disk: which files an ONNX export holds, its size estimate and its tokenizer. */
import { access, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { ChatTokenizer, readJson } from './chat.js';
import type { OnnxModelOptions } from './onnx-types.js';

/** Where Optimum and transformers.js exports put the decoder-with-past graph. */
const MODEL_FILES = ['model.onnx', 'onnx/model.onnx', 'decoder_model_merged.onnx'];
const REQUIRED_FILES = ['config.json', 'tokenizer.json', 'tokenizer_config.json'];

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

export async function locateFiles(dir: string): Promise<string> {
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

export function positiveInt(value: unknown): number | undefined {
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
