import { z } from 'zod';
import { DEFAULTS } from './defaults.js';

export { DEFAULTS, type EnvName } from './defaults.js';

const bool = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');
const int = (min: number) => z.coerce.number().int().min(min);

const schema = z.object({
  REDIS_URL: z.string().url(),
  TASKLINE_REQUIRE_AOF: bool,
  TASKLINE_LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error']),
  TASKLINE_HOST: z.string().min(1),
  TASKLINE_PORT: int(0).max(65535),
  TASKLINE_TASK_RETENTION_S: int(1),
  TASKLINE_EVENT_RETENTION_S: int(1),
  TASKLINE_IDEMPOTENCY_TTL_S: int(86400),
  TASKLINE_IDEMPOTENCY_PENDING_MS: int(100),
  TASKLINE_POLL_INTERVAL_MS: int(1),
  TASKLINE_LEASE_MS: int(100),
  TASKLINE_RECOVERY_INTERVAL_MS: int(10),
  TASKLINE_RECONCILE_AFTER_MS: int(10),
  TASKLINE_METRICS_TENANT_TOP_N: int(0).max(1000),
  TASKLINE_METRICS_PORT: int(0).max(65535),
});

export type Env = z.infer<typeof schema>;

/** Thrown once, at start-up, naming every variable that is wrong. */
export class ConfigError extends Error {
  readonly code = 'invalid_config';
}

/** Reads every setting from `env` over the defaults, validated once; throws ConfigError on any bad value. */
export function loadEnv(env: NodeJS.ProcessEnv = process.env): Env {
  const merged: Record<string, string> = { ...DEFAULTS };
  for (const key of Object.keys(DEFAULTS)) {
    const value = env[key];
    if (value !== undefined && value !== '') merged[key] = value;
  }
  const parsed = schema.safeParse(merged);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new ConfigError(`invalid configuration: ${problems}`);
  }
  if (parsed.data.TASKLINE_EVENT_RETENTION_S > parsed.data.TASKLINE_TASK_RETENTION_S) {
    throw new ConfigError('invalid configuration: TASKLINE_EVENT_RETENTION_S exceeds TASKLINE_TASK_RETENTION_S');
  }
  return parsed.data;
}
