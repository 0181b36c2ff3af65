// The tool worker: a process that serves a team's tools as durable tasks (docs/tools.md).
export { startToolWorker, type ToolWorker, type ToolWorkerOptions } from './start.js';
export { loadToolModule, checkTools } from './load.js';
export { runToolWorker, TOOL_WORKER_USAGE } from './cli.js';
