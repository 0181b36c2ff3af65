/**
 * `@taskline/engine/core`: ids, task states and errors with no Redis behind them, for packages
 * that need the engine's vocabulary but not the engine (auth; check-imports keeps it ioredis-free).
 */
export {
  TASK_STATUSES,
  ON_RESTART_POLICIES,
  isTerminal,
  isTaskStatus,
  visibleStepViolation,
  type TaskStatus,
  type OnRestart,
} from './states.js';
export {
  TasklineError,
  ERROR_CODES,
  historyExpired,
  notFound,
  problem,
  type ErrorCode,
  type Problem,
} from './errors.js';
export { newId, isWellFormedId } from './ids.js';
