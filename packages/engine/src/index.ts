// The engine's face: what other packages use of it, nothing more (check with a grep over packages/,
// services/, test/ and bench/ before adding a name). Engine tests import its modules directly.
// The dependency-light part (ids, states, errors) is also `@taskline/engine/core` (core-face.ts).
export * from './core-face.js';
export {
  TaskStore,
  storeOptionsFromEnv,
  type SweepFailed,
  type SweptTask,
  type Finish,
  type HandOff,
} from './store.js';
export type { ClaimOptions, FirstOutput } from './claim.js';
export { carriedRecord } from './create.js';
export { eventJson, type TaskRecord, type NewTask, type StoredEvent, type TraceContexts } from './records.js';
export {
  emptyResponse,
  isFinalEventType,
  FINAL_EVENT_TYPES,
  type ResponseObject,
  type ResponseStatus,
  type EventInput,
} from './response.js';
export { RESTART_EVENT_TYPE, type Recovered, type RestartReason } from './restart.js';
export { EventHub, type EventHubOptions, type Subscription } from './hub.js';
export { CallHolds } from './held.js';
export {
  servedModelsFromEnv,
  servedModel,
  outputTokens,
  type ModelInfo,
  type ServedModels,
} from './models.js';
export type { RunContext, RunOutcome, TaskRunner } from './runner.js';
export { taskStatuses, subscribeCancels } from './lookups.js';
export { toolTaskIndex } from './keys.js';
export { indexToolTask } from './tool-index.js';
export { OperatorView, type TaskFilter } from './operator.js';
export { takeOnce } from './once.js';
export {
  callbackKey,
  callbackSettingsFromEnv,
  callbackUrl,
  signToken,
  verifyCallback,
  verifyToken,
  CALLBACK_METHOD,
  type CallbackClaims,
  type CallbackOutcome,
  type CallbackSettings,
} from './callbacks.js';
export { isCallbackKey } from './inputs.js';
export { readOutboxes, dropOutboxEntries, dropOutbox, type OutboxEntry } from './outbox.js';
export { readyBacklog } from './sched/views.js';
export {
  connectRedis,
  connectQueueRedis,
  redisAnswers,
  redisTargetFromEnv,
  isCluster,
  isRedisUnavailable,
  timeRedisCommands,
  type RedisTarget,
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
  DURABILITY_LOSS,
  openServiceRedis,
  ReplicaAck,
} from './durability.js';
export { listenForOffers } from './sched/dispatch.js';

// @internal: the scheduler's own (services/scheduler): leadership, dispatch rounds, its metrics.
export { Leadership } from './sched/leader.js';
export {
  defineDispatch,
  pickFair,
  parseWeights,
  handedOver,
  lend,
  readyModels,
  readyModelCount,
  type Pick,
  type FairShareOptions,
} from './sched/dispatch.js';
export { writeWorkerSnapshot } from './sched/views.js';
export { indexTenant } from './keys.js';

// @internal: the script loader, for packages with Lua of their own (admission) and worker tests.
export { defineScripts, scriptSource } from './scripts.js';
