// The face of @taskline/client: the LMSP and MCP clients, their task id stores, errors and polling.
export { TasklineClientError, type ClientErrorCode } from './errors.js';
export { systemClock, type Clock } from './clock.js';
export { DEFAULT_POLL, nextPollDelay, type PollPolicy } from './poll.js';
export {
  credentialId,
  tokenHashId,
  MemoryTaskIdStore,
  type TaskIdStore,
  type TaskScope,
  type TrackedTask,
} from './store.js';
export { DEFAULT_MAX_RETRY_AFTER_S, type TransportOptions } from './http.js';
export {
  FINAL_EVENT_TYPES,
  isFinalEvent,
  isTerminalStatus,
  LmspClient,
  responseText,
  RESTART_EVENT_TYPE,
  TERMINAL_STATUSES,
  TextAssembler,
  type CancelOutcome,
  type Capabilities,
  type CreateTaskRequest,
  type LmspClientOptions,
  type Problem,
  type ResponseObject,
  type ResponseRequest,
  type ResumedTask,
  type StreamEvent,
  type Task,
  type TaskStatus,
  type WaitOptions,
} from './lmsp.js';
export {
  MCP_PROTOCOL_VERSION,
  McpTasksClient,
  rpcCodeOf,
  type FollowOptions,
  type InputHandler,
  type InputRequests,
  type InputResponses,
  type McpClientOptions,
  type McpTask,
  type ToolResult,
} from './mcp.js';
