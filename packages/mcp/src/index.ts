export {
  createMcpRouter,
  LOCAL_TENANT,
  type McpRouterDeps,
  type McpObserver,
  type McpEnv,
} from './router.js';
export { TASKS_EXTENSION, taskFields, detailedTask, declaresTasks } from './view.js';
