// The tools a deployment offers, built the same way by the api and the gpu-worker.
import { ToolRegistry, type ModelChoice } from './api.js';
import { batchGenerateTool } from './batch.js';
import { generateTool } from './generate.js';

export interface BuiltinToolOptions {
  /** Estimated tokens above which `batch_generate` asks the caller to confirm (TASKLINE_BATCH_CONFIRM_ABOVE_TOKENS). */
  batchConfirmAboveTokens: number;
  /**
   * Registers tools beyond the built-in ones (none in production; the conformance suite's entries
   * add its fixtures). The api and the worker must extend alike, as they must agree on the tools.
   */
  extend?: (registry: ToolRegistry) => ToolRegistry;
  /** The served models the generation tools' `model` lists; absent, any id passes the schema. */
  models?: ModelChoice;
}

/**
 * The tools a deployment offers. The api (which lists and accepts calls) and the gpu-worker (which
 * runs them) both build their registry here, so the two always agree on names and schemas.
 */
export function builtinTools(options: BuiltinToolOptions): ToolRegistry {
  const registry = new ToolRegistry()
    .register(generateTool(options.models))
    .register(
      batchGenerateTool({ confirmAbove: () => options.batchConfirmAboveTokens, models: options.models }),
    );
  return options.extend ? options.extend(registry) : registry;
}
