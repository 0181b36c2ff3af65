import { ToolRegistry, type ModelChoice } from './api.js';
import { batchGenerateTool } from './batch.js';
import { registerConformanceTools } from './conformance.js';
import { generateTool } from './generate.js';

export interface BuiltinToolOptions {
  /** Estimated tokens above which `batch_generate` asks the caller to confirm (TASKLINE_BATCH_CONFIRM_ABOVE_TOKENS). */
  batchConfirmAboveTokens: number;
  /** Adds the conformance suite's fixtures (TASKLINE_MCP_CONFORMANCE_TOOLS). */
  conformance: boolean;
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
  return options.conformance ? registerConformanceTools(registry) : registry;
}
