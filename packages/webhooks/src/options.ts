/** The webhook settings from the validated environment (`@taskline/config`), for the api and the scheduler. */
import type { LinkSettings } from './links.js';
import type { Reach } from './safety.js';
import { retrySchedule, type RetrySchedule } from './schedule.js';
import type { SendLimits } from './send.js';

export interface WebhookEnv {
  TASKLINE_WEBHOOK_ALLOW_HTTP: boolean;
  TASKLINE_WEBHOOK_ALLOW_PRIVATE: boolean;
  TASKLINE_WEBHOOK_TIMEOUT_MS: number;
  TASKLINE_WEBHOOK_MAX_RESPONSE_BYTES: number;
  TASKLINE_WEBHOOK_RETRY_BASE_MS: number;
  TASKLINE_WEBHOOK_RETRY_CAP_MS: number;
  TASKLINE_WEBHOOK_MAX_ATTEMPTS: number;
  TASKLINE_WEBHOOK_DISABLE_AFTER: number;
  TASKLINE_WEBHOOK_CONCURRENCY: number;
  TASKLINE_WEBHOOK_RELAY_MS: number;
  TASKLINE_WEBHOOK_KEEP_S: number;
  TASKLINE_WEBHOOK_ROTATION_OVERLAP_S: number;
  TASKLINE_WEBHOOK_LINK_SECRET: string;
  TASKLINE_PUBLIC_URL: string;
  TASKLINE_WEBHOOK_LINK_TTL_S: number;
}

export interface WebhookSettings {
  reach: Reach;
  limits: SendLimits;
  schedule: RetrySchedule;
  disableAfter: number;
  concurrency: number;
  relayMs: number;
  keepMs: number;
  rotationOverlapMs: number;
  /** Answer links: none without a link secret. */
  links?: LinkSettings;
}

export function webhookSettingsFromEnv(env: WebhookEnv): WebhookSettings {
  const reach = {
    allowHttp: env.TASKLINE_WEBHOOK_ALLOW_HTTP,
    allowPrivate: env.TASKLINE_WEBHOOK_ALLOW_PRIVATE,
  };
  return {
    reach,
    limits: {
      reach,
      timeoutMs: env.TASKLINE_WEBHOOK_TIMEOUT_MS,
      maxResponseBytes: env.TASKLINE_WEBHOOK_MAX_RESPONSE_BYTES,
    },
    schedule: retrySchedule(
      env.TASKLINE_WEBHOOK_RETRY_BASE_MS,
      env.TASKLINE_WEBHOOK_RETRY_CAP_MS,
      env.TASKLINE_WEBHOOK_MAX_ATTEMPTS,
    ),
    disableAfter: env.TASKLINE_WEBHOOK_DISABLE_AFTER,
    concurrency: env.TASKLINE_WEBHOOK_CONCURRENCY,
    relayMs: env.TASKLINE_WEBHOOK_RELAY_MS,
    keepMs: env.TASKLINE_WEBHOOK_KEEP_S * 1000,
    rotationOverlapMs: env.TASKLINE_WEBHOOK_ROTATION_OVERLAP_S * 1000,
    ...(env.TASKLINE_WEBHOOK_LINK_SECRET && {
      links: {
        secret: env.TASKLINE_WEBHOOK_LINK_SECRET,
        baseUrl: env.TASKLINE_PUBLIC_URL,
        ttlMs: env.TASKLINE_WEBHOOK_LINK_TTL_S * 1000,
      },
    }),
  };
}
