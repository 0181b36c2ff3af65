// The face of @taskline/mcp: the `/mcp` router and what the api needs of it.
export {
  createMcpRouter,
  LOCAL_TENANT,
  UNAVAILABLE_CODE,
  type McpRouterDeps,
  type McpEnv,
} from './router.js';
export type { McpObserver } from './observe.js';
export type { McpExtensions } from './extensions.js';
export { TASKS_EXTENSION, taskFields, detailedTask, declaresTasks } from './view.js';
export { RATE_LIMITED_CODE } from './errors.js';
