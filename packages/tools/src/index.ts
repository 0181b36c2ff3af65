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
// Tool tasks all run on one queue, whatever models they call: the control plane names it.
export { TOOLS_MODEL } from '@taskline/control/queues';
export { createToolRunner, waitFor, type ToolRunner, type ToolRunnerOptions } from './runner.js';
export { generateTool } from './generate.js';
export { batchGenerateTool, type BatchOptions } from './batch.js';
export { builtinTools, type BuiltinToolOptions } from './builtin.js';
