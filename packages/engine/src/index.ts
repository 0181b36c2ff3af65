export {
  TASK_STATUSES,
  TERMINAL_STATUSES,
  TRANSITIONS,
  CANCEL_OUTCOME,
  ON_RESTART_POLICIES,
  isTerminal,
  isTaskStatus,
  sourcesOf,
  toMcpStatus,
  recoveryTarget,
  visibleStatus,
  visibleStepViolation,
  VISIBLE_TRANSITIONS,
  type TaskStatus,
  type TerminalStatus,
  type McpTaskStatus,
  type OnRestart,
} from './states.js';
export {
  TaskStore,
  storeOptionsFromEnv,
  eventObject,
  eventJson,
  notFound,
  problem,
  type TaskRecord,
  type TaskKind,
  type NewTask,
  type StoredEvent,
  type TaskStoreOptions,
  type TransitionObserved,
  type CancelOutcome,
  type Finish,
} from './store.js';
export {
  emptyResponse,
  statusEvent,
  finalEvent,
  isFinalEventType,
  FINAL_EVENT_TYPES,
  type ResponseObject,
  type ResponseStatus,
  type Problem,
  type EventInput,
} from './response.js';
export { RESTART_EVENT_TYPE, type Recovered, type RestartReason } from './restart.js';
export { EventHub, type Subscription } from './hub.js';
export {
  servedModelsFromEnv,
  servedModel,
  outputTokens,
  type ModelInfo,
  type ServedModels,
} from './models.js';
export type { RunContext, RunOutcome, TaskRunner } from './runner.js';
export { TasklineError, ERROR_CODES, type ErrorCode } from './errors.js';
export {
  taskKeys,
  schedulerKeys,
  idempotencyKey,
  workerCancelChannel,
  queueTenant,
  childrenQueue,
  indexTenant,
  offeredState,
  parseOfferedState,
  type QueuedState,
} from './keys.js';
export { newId, isWellFormedId } from './ids.js';
export {
  OperatorView,
  operatorKeys,
  readyBacklog,
  writeWorkerSnapshot,
  type ReadyBacklog,
  type TaskFilter,
  type TaskRow,
  type WorkerSnapshot,
} from './operator.js';
export { scriptSource, type ScriptName } from './scripts.js';
export {
  connectRedis,
  connectQueueRedis,
  redisTargetFromEnv,
  isCluster,
  nodeOf,
  isRedisUnavailable,
  timeRedisCommands,
  type RedisTarget,
  type ClusterTarget,
} from './redis.js';
export {
  redisUnavailableReason,
  REDIS_UNAVAILABLE_REASONS,
  type RedisUnavailableReason,
} from './unavailable.js';
export {
  checkDurability,
  durabilityFromEnv,
  ReplicaAck,
  DURABILITY_LOSS,
  type DurabilityLevel,
  type DurabilityCheck,
  type DurabilityReport,
} from './durability.js';
