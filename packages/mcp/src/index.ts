export {
  createMcpRouter,
  LOCAL_TENANT,
  UNAVAILABLE_CODE,
  type McpLimits,
  type McpTaskReservation,
  type McpStreamSlot,
  type McpRouterDeps,
  type McpObserver,
  type McpEnv,
} from './router.js';
export { TASKS_EXTENSION, taskFields, detailedTask, declaresTasks } from './view.js';
export { RATE_LIMITED_CODE } from './rpc.js';
