export {
  createMcpRouter,
  LOCAL_TENANT,
  RATE_LIMITED_CODE,
  UNAVAILABLE_CODE,
  type McpLimits,
  type McpTaskReservation,
  type McpRouterDeps,
  type McpObserver,
  type McpEnv,
} from './router.js';
export { TASKS_EXTENSION, taskFields, detailedTask, declaresTasks } from './view.js';
