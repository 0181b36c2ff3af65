// The face of @taskline/tools: the tool API, the runner and the built-in tools.
export {
  ToolRegistry,
  ToolFailure,
  defineTool,
  checkGeneration,
  canAnswer,
  ANSWER_CAPABILITIES,
  modelChoice,
  modelField,
  type ModelChoice,
  TOOLS_MODEL,
  type ToolDefinition,
  type ToolContext,
  type ToolResult,
  type ToolTaskRequest,
  type TaskSupport,
  type InputRequest,
  type Prepared,
  type GenerateRequest,
  type GenerateOutcome,
} from './api.js';
export { createToolRunner, waitFor, type ToolRunner, type ToolRunnerOptions } from './runner.js';
export { generateTool } from './generate.js';
export { batchGenerateTool, type BatchOptions } from './batch.js';
export { builtinTools, type BuiltinToolOptions } from './builtin.js';
