// The face of @taskline/tools: the tool API, the runner and the built-in tools.
export {
  ToolRegistry,
  checkGeneration,
  canAnswer,
  ANSWER_CAPABILITIES,
  modelChoice,
  modelField,
  type ModelChoice,
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
// The built-in tools' tasks all run on one queue (the gpu-workers'), whatever models they call: the
// control plane names it.
export { TOOLS_MODEL } from '@taskline/control/queues';
export { generateTool } from './generate.js';
export { batchGenerateTool, type BatchOptions } from './batch.js';
export { builtinTools, type BuiltinToolOptions } from './builtin.js';
export { LiveTools, type LiveToolEntry, type LiveWorkerEntry, type LiveToolsOptions } from './live.js';
