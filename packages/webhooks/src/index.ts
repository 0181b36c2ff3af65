/** `@taskline/webhooks`: tenants' outbound webhooks (docs/webhooks.md). */
export {
  EndpointStore,
  EndpointError,
  HOOK_EVENTS,
  viewOf,
  type EndpointRecord,
  type EndpointView,
  type EndpointInput,
  type HookEvent,
} from './endpoints.js';
export { Relay, type RelayOptions } from './relay.js';
export type { DeliveryJob } from './queues.js';
export { DeliveryWorkers, type DeliveryOptions } from './delivery.js';
export { retrySchedule, type RetrySchedule } from './schedule.js';
export { checkUrl, isNonPublic, UnsafeTarget, type Reach, type Resolve } from './safety.js';
export { send, type AttemptResult, type SendLimits } from './send.js';
export { webhookWatch, type WebhookWatch } from './watch.js';
export { endpointQueue, endpointQueuePrefix, hookKeys } from './keys.js';
export { WebhookRole, type RoleOptions } from './role.js';
export { webhookSettingsFromEnv, type WebhookEnv, type WebhookSettings } from './options.js';
export { Redeliveries } from './redeliver.js';
export {
  answerLinks,
  LINK_CHOICES,
  verifyLink,
  type LinkChoice,
  type LinkClaims,
  type LinkSettings,
} from './links.js';
