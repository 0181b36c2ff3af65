// The face of @taskline/engine: states, the store, the hub, dispatch, leadership, errors.
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
  renderStateDiagram,
  type TaskStatus,
  type TerminalStatus,
  type McpTaskStatus,
  type OnRestart,
} from './states.js';
export {
  TaskStore,
  storeOptionsFromEnv,
  type SweepFailed,
  type SweptTask,
  type TaskStoreOptions,
  type CancelOutcome,
  type Finish,
} from './store.js';
export {
  eventObject,
  eventJson,
  type TaskRecord,
  type TaskKind,
  type NewTask,
  type StoredEvent,
  type TransitionObserved,
} from './records.js';
export {
  emptyResponse,
  statusEvent,
  finalEvent,
  isFinalEventType,
  FINAL_EVENT_TYPES,
  type ResponseObject,
  type ResponseStatus,
  type EventInput,
} from './response.js';
export { RESTART_EVENT_TYPE, type Recovered, type RestartReason } from './restart.js';
export { EventHub, type Subscription } from './hub.js';
export { CallHolds } from './held.js';
export {
  servedModelsFromEnv,
  servedModel,
  outputTokens,
  type ModelInfo,
  type ServedModels,
} from './models.js';
export type { RunContext, RunOutcome, TaskRunner } from './runner.js';
export {
  TasklineError,
  ERROR_CODES,
  historyExpired,
  notFound,
  problem,
  type ErrorCode,
  type Problem,
} from './errors.js';
export { indexTenant, toolTaskIndex } from './keys.js';
export { taskStatuses, subscribeCancels } from './lookups.js';
export { indexToolTask } from './tool-index.js';
export { Leadership } from './leader.js';
export {
  defineDispatch,
  pickFair,
  parseWeights,
  handedOver,
  readyModels,
  readyModelCount,
  listenForOffers,
  type Pick,
  type FairShareOptions,
} from './dispatch.js';
export { newId, isWellFormedId } from './ids.js';
export {
  OperatorView,
  readyBacklog,
  writeWorkerSnapshot,
  type ReadyBacklog,
  type TaskFilter,
  type TaskRow,
  type WorkerSnapshot,
} from './operator.js';
export {
  defineScripts,
  scriptSource,
  type ScriptOptions,
  type ScriptReply,
  type ScriptRunner,
} from './scripts.js';
export {
  connectRedis,
  connectQueueRedis,
  redisAnswers,
  redisTargetFromEnv,
  isCluster,
  nodeOf,
  isRedisUnavailable,
  timeRedisCommands,
  type RedisTarget,
  type ClusterTarget,
} from './redis.js';
export {
  markUnconfirmedCreate,
  redisUnavailableReason,
  REDIS_UNAVAILABLE_REASONS,
  unconfirmedCreate,
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
