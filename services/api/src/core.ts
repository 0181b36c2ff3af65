// What every surface of the api is built on: the store, hub, authenticator, limits and admission.
import type { Redis } from 'ioredis';
import { Admission, AuthFailureLimits, TenantLimits } from '@taskline/admission';
import { authenticator, type AuthGuard, type Authenticator } from '@taskline/auth';
import type { Env } from '@taskline/config';
import type { JobQueues } from '@taskline/control';
import {
  CallHolds,
  EventHub,
  servedModelsFromEnv,
  storeOptionsFromEnv,
  TaskStore,
  type HandOff,
  type ServedModels,
} from '@taskline/engine';
import type { Logger } from '@taskline/log';
import type { McpExtensions } from '@taskline/mcp';
import type { BuildInfo, TasklineMetrics } from '@taskline/metrics';
import { tracingOn } from '@taskline/tracing';
import {
  EndpointStore,
  Redeliveries,
  webhookSettingsFromEnv,
  webhookWatch,
  type LinkSettings,
  type WebhookWatch,
} from '@taskline/webhooks';
import { StreamRegistry } from './sse.js';

export interface AppDeps {
  env: Env;
  /** Commands (tasks, keys, limits). */
  redis: Redis;
  logger: Logger;
  /**
   * Prometheus metrics (`@taskline/metrics`), counted here; they are served by the metrics
   * listener of `main.ts` (`TASKLINE_METRICS_PORT`), never on the port clients reach: they name
   * the busiest tenants.
   */
  metrics?: TasklineMetrics;
  /** This process's version and build, answered by `/healthz`. */
  build?: BuildInfo;
  /** What `/mcp` serves beyond the built-in tools: none in production (the conformance entry's fixtures). */
  mcpExtensions?: McpExtensions;
  /**
   * The models' BullMQ queues, where a create that took a slot the scheduler leader lent queues its
   * own task's job (TaskStoreOptions.handOff). Without them every create waits for a dispatch round.
   */
  jobs?: JobQueues;
}

/** What every surface of the api is built on: the engine, the authenticator and the one admission path. */
export interface ApiCore extends AppDeps {
  store: TaskStore;
  hub: EventHub;
  auth: Authenticator;
  limits: TenantLimits;
  admission: Admission;
  /** This process's open SSE streams, ended with a `retry:` hint on shutdown. */
  streams: StreamRegistry;
  served: ServedModels;
  /**
   * `authenticate` run for `req` under its client address's limit of failed authentications
   * (`req.ip`, as TASKLINE_TRUST_PROXY reads it). A request without an Authorization header
   * guesses nothing and verifies nothing: it is neither refused nor counted.
   */
  guardAuth: AuthGuard;
  /**
   * Tenants' webhook endpoints and their manual redeliveries (docs/webhooks.md); `watch`, the
   * store's question whether a create's tenant has endpoints, which the gate warms.
   */
  webhooks: {
    endpoints: EndpointStore;
    redeliveries: Redeliveries;
    links: LinkSettings | undefined;
    watch: WebhookWatch;
  };
}

export function createCore(deps: AppDeps): ApiCore {
  const { env, redis, logger } = deps;
  const hooks = webhookSettingsFromEnv(env);
  const watch = webhookWatch(redis);
  const store = new TaskStore(redis, {
    ...storeOptionsFromEnv(env),
    replicaAckTimeoutMs: env.TASKLINE_REPLICA_ACK_TIMEOUT_MS,
    onTransition: deps.metrics?.transitioned,
    watchWebhooks: watch,
    ...(deps.jobs && { handOff: handOffTo(deps.jobs, logger) }),
  });
  const hub = new EventHub(store);
  const limits = new TenantLimits(redis, {
    ratePerS: env.TASKLINE_RATE_LIMIT_PER_S,
    burst: env.TASKLINE_RATE_LIMIT_BURST,
    maxUnfinishedTasks: env.TASKLINE_MAX_UNFINISHED_TASKS,
    maxStreams: env.TASKLINE_MAX_STREAMS,
    streamLeaseMs: env.TASKLINE_SSE_HEARTBEAT_MS * 3,
    // Longer than a task waits for its caller's input, the longest an unfinished task usually lasts.
    unfinishedTtlMs: env.TASKLINE_INPUT_TIMEOUT_S * 2000,
  });
  const authFailures = new AuthFailureLimits(redis, {
    maxFailures: env.TASKLINE_AUTH_FAILURE_LIMIT,
    windowMs: env.TASKLINE_AUTH_FAILURE_WINDOW_S * 1000,
  });
  const guardAuth: AuthGuard = (req, authenticate) => {
    const credential = req.headers.authorization;
    return credential === undefined
      ? authenticate(req.headers)
      : authFailures.guard(req.ip ?? req.socket.remoteAddress ?? '', credential, () =>
          authenticate(req.headers),
        );
  };
  return {
    ...deps,
    store,
    hub,
    auth: authenticator(env, redis, guardAuth),
    limits,
    admission: new Admission({
      store,
      hub,
      holds: new CallHolds(redis, env.TASKLINE_CALLER_LEASE_MS, (err) =>
        logger.warn('call lease renewal failed', { err }),
      ),
      limits,
      logger,
      // A create's record waits for its tenant's webhook answer: asked beside the rate limit, not after.
      warm: (tenant) => watch.warm(tenant),
    }),
    streams: new StreamRegistry(),
    served: servedModelsFromEnv(env),
    guardAuth,
    webhooks: {
      endpoints: new EndpointStore(redis, hooks.reach, hooks.rotationOverlapMs),
      redeliveries: new Redeliveries(redis, hooks.schedule),
      links: hooks.links,
      watch,
    },
  };
}

/** Queues the job of a task its create dispatched on a lent slot, traced as the leader's rounds are. */
function handOffTo(jobs: JobQueues, logger: Logger): (task: HandOff) => Promise<void> {
  return (task) =>
    jobs
      .handOff(task.model, task, tracingOn() && task.traceparent ? { task: task.traceparent } : undefined)
      .catch((err: unknown) => {
        // The reconciler queues it again (an old pick in flight); the log says why it was late.
        logger.warn('hand_off_failed', { task: task.id, err });
        throw err;
      });
}
