export {
  ToolRegistry,
  checkGeneration,
  canAnswer,
  ANSWER_CAPABILITIES,
  modelChoice,
  modelField,
  type ModelChoice,
  TOOLS_MODEL,
  toolQueue,
  type ToolPlacement,
  type ToolTaskRequest,
} from './api.js';
export {
  defineTool,
  ToolFailure,
  validateTool,
  InvalidToolError,
  isToolDefinition,
  type ToolDefinition,
  type ToolContext,
  type ToolResult,
  type TaskSupport,
  type OnRestart,
  type InputRequest,
  type Prepared,
  type PrepareContext,
  type GenerateRequest,
  type GenerateOutcome,
  type Json,
} from '@taskline/tool-sdk';
export {
  createToolRunner,
  waitFor,
  type RunnerLogger,
  type ToolRunner,
  type ToolRunnerOptions,
} from './runner.js';
export { generateTool } from './generate.js';
export { batchGenerateTool, type BatchOptions } from './batch.js';
export { builtinTools, type BuiltinToolOptions } from './builtin.js';
export { LiveTools, type LiveToolEntry, type LiveWorkerEntry, type LiveToolsOptions } from './live.js';
