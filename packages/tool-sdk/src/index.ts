// The public tool SDK: what a team's own repository imports to write a tool Taskline runs as a durable task.
export {
  defineTool,
  ToolFailure,
  type ToolDefinition,
  type ToolContext,
  type ToolLogger,
  type ToolResult,
  type TaskSupport,
  type OnRestart,
  type InputRequest,
  type Prepared,
  type PrepareContext,
  type GenerateRequest,
  type GenerateOutcome,
  type Json,
  type CallbackOptions,
} from './tool.js';
export {
  validateTool,
  isToolDefinition,
  InvalidToolError,
  TOOL_NAME,
  type ToolJsonSchemas,
} from './validate.js';
