/**
 * The scheduler's webhook role (docs/webhooks.md, "Where it runs"): every replica, leader or not,
 * runs the relay and the delivery workers; BullMQ shares the jobs out, and a relay pass run twice
 * queues nothing twice.
 */
import type { Redis } from 'ioredis';
import type { Env } from '@taskline/config';
import { connectQueueRedis, type RedisTarget, type TaskStore } from '@taskline/engine';
import type { Logger } from '@taskline/log';
import type { TasklineMetrics } from '@taskline/metrics';
import { EndpointStore, WebhookRole, webhookSettingsFromEnv } from '@taskline/webhooks';

export interface WebhookDeps {
  env: Env;
  redis: Redis;
  redisTarget: RedisTarget;
  store: TaskStore;
  log: Logger;
  metrics: TasklineMetrics;
}

export function startWebhooks({ env, redis, redisTarget, store, log, metrics }: WebhookDeps): WebhookRole {
  const settings = webhookSettingsFromEnv(env);
  const endpoints = new EndpointStore(redis, settings.reach, settings.rotationOverlapMs);
  const role = new WebhookRole({
    relay: {
      redis,
      queueRedis: connectQueueRedis(redisTarget, 'webhook-relay'),
      store,
      endpoints,
      schedule: settings.schedule,
      logger: log,
      keepMs: settings.keepMs,
      links: settings.links,
    },
    delivery: {
      redis,
      connect: () => connectQueueRedis(redisTarget, 'webhook-worker'),
      endpoints,
      schedule: settings.schedule,
      limits: settings.limits,
      logger: log,
      concurrency: settings.concurrency,
      disableAfter: settings.disableAfter,
      onAttempt: (endpoint, result) =>
        metrics.webhookAttemptsTotal.inc({
          tenant: metrics.tenant(endpoint.tenant),
          outcome: result.ok ? 'ok' : 'failed',
        }),
      onDisabled: (endpoint) =>
        metrics.webhookEndpointsDisabledTotal.inc({ tenant: metrics.tenant(endpoint.tenant) }),
    },
    relayMs: settings.relayMs,
    logger: log,
  });
  role.start();
  return role;
}
