/**
 * Every default of every service, in one place. Each key is the environment variable that
 * overrides it; `loadConfig` validates them once at start-up.
 */
export const DEFAULTS = {
  /** Where the services find Redis. The local stack (`pnpm start`) starts its own with AOF. */
  REDIS_URL: 'redis://127.0.0.1:6390',
  /** Refuse to start against a Redis without AOF: an acknowledged task must survive a crash. */
  TASKLINE_REQUIRE_AOF: 'true',
  TASKLINE_LOG_LEVEL: 'info',

  TASKLINE_HOST: '127.0.0.1',
  TASKLINE_PORT: '8080',

  /** Terminal tasks are kept this long after they end, then read as never having existed. */
  TASKLINE_TASK_RETENTION_S: String(24 * 3600),
  /** Event history of a terminal task; never longer than the task itself. */
  TASKLINE_EVENT_RETENTION_S: String(24 * 3600),
  /** LMSP-GAPS 9.2: idempotency keys are kept at least 24 h. */
  TASKLINE_IDEMPOTENCY_TTL_S: String(24 * 3600),
  /** How long a half-finished create holds its idempotency key before another request may take over. */
  TASKLINE_IDEMPOTENCY_PENDING_MS: '30000',
  /** Suggested polling interval for clients (MCP `pollIntervalMs`). */
  TASKLINE_POLL_INTERVAL_MS: '1000',

  /** A worker's lease on a task; renewed every third of it. */
  TASKLINE_LEASE_MS: '6000',
  /** How often the scheduler looks for expired leases: a dead worker's tasks are recovered within lease + this. */
  TASKLINE_RECOVERY_INTERVAL_MS: '2000',
  /** A task persisted this long without a queue entry is queued by the reconciler. */
  TASKLINE_RECONCILE_AFTER_MS: '10000',
  /** Tenants that get their own `tenant` label on metrics; the rest are aggregated as `other`. */
  TASKLINE_METRICS_TENANT_TOP_N: '20',
  /** `/metrics` port of services without an HTTP API (scheduler, gpu-worker); 0 picks a free one. */
  TASKLINE_METRICS_PORT: '9464',
} as const;

export type EnvName = keyof typeof DEFAULTS;
