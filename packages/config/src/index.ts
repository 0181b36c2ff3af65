// Every setting as an environment variable, validated once by `loadEnv()` (defaults in defaults.ts).
import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { z } from 'zod';
import { DEFAULTS, DEPRECATED_NAMES } from './defaults.js';

export { DEFAULTS, DEPRECATED_NAMES } from './defaults.js';

const bool = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');
const int = (min: number) => z.coerce.number().int().min(min);

/** Asymmetric JWS algorithms (RFC 7518, RFC 8037), a list of one or more: never HS* or `none`. */
const JWT_ALGORITHMS = /^((RS|PS|ES)(256|384|512)|EdDSA|Ed25519)(,((RS|PS|ES)(256|384|512)|EdDSA|Ed25519))*$/;

const PROXY_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** An address or CIDR as Express's `trust proxy` (proxy-addr) reads one, or a name of a range. */
function validTrustProxy(value: string): boolean {
  if (/^(true|false|\d{1,2})$/.test(value)) return true;
  return value.split(',').every((entry) => {
    const [address, bits, ...rest] = entry.trim().split('/');
    const family = isIP(address!);
    if (rest.length > 0) return false;
    if (bits === undefined) return family !== 0 || PROXY_NAMES.has(address!);
    return family !== 0 && /^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128);
  });
}

/** What Express's `trust proxy` setting takes: a boolean, a number of hops, or a list. */
function trustProxy(value: string): boolean | number | string[] {
  if (value === 'true' || value === 'false') return value === 'true';
  if (/^\d+$/.test(value)) return Number(value);
  return value.split(',').map((entry) => entry.trim());
}

const schema = z.object({
  REDIS_URL: z
    .string()
    .url()
    .regex(
      /^(redis|rediss|redis-cluster|rediss-cluster):\/\//,
      'redis://, rediss://, redis-cluster:// or rediss-cluster://',
    ),
  TASKLINE_REDIS_CLUSTER_NODES: z
    .string()
    .regex(/^([^,\s]+:\d+(,[^,\s]+:\d+)*)?$/, 'comma separated host:port seed nodes, or empty'),
  TASKLINE_REDIS_USERNAME: z.string(),
  TASKLINE_REDIS_PASSWORD: z.string(),
  TASKLINE_REDIS_TLS: bool,
  TASKLINE_REQUIRE_AOF: bool,
  TASKLINE_DURABILITY: z.enum(['always', 'everysec']),
  TASKLINE_REPLICA_ACK_TIMEOUT_MS: int(1).max(60_000),
  TASKLINE_REDIS_COMMAND_TIMEOUT_MS: int(100).max(600_000),
  TASKLINE_BUILD_REVISION: z
    .string()
    .regex(/^[A-Za-z0-9._+-]{0,64}$/, 'a revision: letters, digits, . _ + -'),
  TASKLINE_LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error']),
  TASKLINE_LOG_BUFFER_BYTES: int(64 * 1024),
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
  TASKLINE_CALLER_LEASE_MS: int(300),
  TASKLINE_CONTROL_HOST: z.string().min(1),
  TASKLINE_CONTROL_PORT: int(0).max(65535),
  TASKLINE_CONTROL_ADVERTISE: z.string().regex(/^([^,\s]+:\d+)?$/, 'host:port, or empty'),
  TASKLINE_CONTROL_TOKEN: z
    .string()
    .regex(/^([^,\s]{32,}(,[^,\s]{32,})*)?$/, 'tokens of 32+ characters, comma separated, or empty'),
  TASKLINE_CONTROL_TLS_CA: z.string(),
  TASKLINE_CONTROL_TLS_CERT: z.string(),
  TASKLINE_CONTROL_TLS_KEY: z.string(),
  TASKLINE_CONTROL_TLS_SERVER_NAME: z.string(),
  TASKLINE_CONTROL_PLAINTEXT: bool,
  TASKLINE_SCHEDULER_ADDR: z.string().regex(/^[^,\s]+:\d+(,[^,\s]+:\d+)*$/, 'comma separated host:port'),
  TASKLINE_LEADER_LEASE_MS: int(100),
  TASKLINE_HEARTBEAT_MS: int(10),
  TASKLINE_WORKER_TIMEOUT_MS: int(50),
  TASKLINE_DISPATCH_INTERVAL_MS: int(5),
  TASKLINE_DISPATCH_QUANTUM: int(1),
  // A weight of 0 would starve its tenant for good (dispatch gives it nothing each round): refused.
  TASKLINE_TENANT_WEIGHTS: z
    .string()
    .regex(
      /^([^,:\s]+:0*[1-9]\d*(,[^,:\s]+:0*[1-9]\d*)*)?$/,
      'tenant:weight pairs, each weight a whole number of 1 or more',
    ),
  TASKLINE_TENANT_MAX_RUNNING: int(1),
  TASKLINE_INDEX_SWEEP_MS: int(10),
  TASKLINE_MODELS_DIR: z.string().min(1),
  TASKLINE_WORKER_MODELS: z.string().regex(/^[^,\s]+(,[^,\s]+)*$/, 'comma separated model ids'),
  TASKLINE_WORKER_SLOTS: int(1),
  TASKLINE_MODEL_MEMORY_MB: int(1),
  TASKLINE_EXECUTION_PROVIDER: z.enum(['cpu', 'cuda']),
  TASKLINE_INTRA_OP_THREADS: int(0).max(256),
  TASKLINE_PREFILL_CHUNK_TOKENS: int(1),
  TASKLINE_DRAIN_DEADLINE_MS: int(0),
  TASKLINE_MAX_ATTEMPTS: int(1),
  TASKLINE_WORKER_MIN_STEP_MS: int(0),
  TASKLINE_STREAM_FLUSH_MS: int(0).max(1000),
  TASKLINE_WORKER_FETCHERS: int(1).max(64),
  TASKLINE_WORKER_ID: z.string().regex(/^[A-Za-z0-9._-]{0,64}$/, 'letters, digits, . _ - (64 at most)'),
  TASKLINE_TOOL_MODULE: z.string(),
  TASKLINE_TOOL_TENANTS: z.string().regex(/^(\*|[^,\s*]+(,[^,\s*]+)*)$/, '`*` or comma separated tenant ids'),
  TASKLINE_TOOL_VERSION: z.string().regex(/^[A-Za-z0-9._+-]{0,64}$/, 'letters, digits, . _ + - (64 at most)'),
  TASKLINE_TOOL_CONCURRENCY: int(0).max(1024),
  TASKLINE_TOOL_REGISTRY_TTL_MS: int(300),
  TASKLINE_TOOL_DEPLOYED_RETENTION_MS: int(0),
  TASKLINE_TOOL_CHECKPOINT_MAX_BYTES: int(2).max(64 * 1024 * 1024),
  TASKLINE_UPSTREAMS: z.string(),
  TASKLINE_UPSTREAM_TIMEOUT_MS: int(1),
  TASKLINE_UPSTREAM_MAX_RESULT_BYTES: int(2).max(64 * 1024 * 1024),
  TASKLINE_TOOL_LIST_CACHE_MS: int(0).max(60_000),
  TASKLINE_METRICS_TENANT_TOP_N: int(0).max(1000),
  TASKLINE_METRICS_PORT: int(0).max(65535),
  TASKLINE_MODELS: z.string().regex(/^[^,\s]+(,[^,\s]+)*$/, 'comma separated model ids'),
  TASKLINE_SNAPSHOT_MODELS: z.string().regex(/^([^,\s]+(,[^,\s]+)*)?$/, 'comma separated model ids'),
  TASKLINE_DEFAULT_MODEL: z.string().regex(/^[^,\s]*$/, 'one model id of TASKLINE_MODELS, or empty'),
  TASKLINE_API_KEYS: z
    .string()
    .regex(
      /^([A-Za-z0-9._-]{1,64}:[^,\s]{8,}(,[A-Za-z0-9._-]{1,64}:[^,\s]{8,})*)?$/,
      'tenant:key pairs (keys of 8+ characters)',
    ),
  TASKLINE_JWT_PUBLIC_KEY: z.string(),
  TASKLINE_JWT_JWKS_URL: z.union([z.literal(''), z.string().url()]),
  TASKLINE_JWT_TENANT_CLAIM: z.string().min(1),
  TASKLINE_JWT_ISSUER: z.string(),
  TASKLINE_JWT_AUDIENCE: z.string(),
  TASKLINE_JWT_ALGORITHMS: z
    .string()
    .regex(JWT_ALGORITHMS, 'asymmetric JWS algorithms (RS256, PS256, ES256, EdDSA...), comma separated'),
  TASKLINE_JWT_CLOCK_TOLERANCE_S: int(0).max(300),
  TASKLINE_MAX_BODY_BYTES: int(1024),
  TASKLINE_MAX_OUTPUT_TOKENS: int(1),
  TASKLINE_RATE_LIMIT_PER_S: z.coerce.number().positive(),
  TASKLINE_RATE_LIMIT_BURST: int(1),
  TASKLINE_AUTH_FAILURE_LIMIT: int(1),
  TASKLINE_AUTH_FAILURE_WINDOW_S: int(1).max(86400),
  TASKLINE_TRUST_PROXY: z
    .string()
    .refine(
      validTrustProxy,
      'false, true, a number of hops, or addresses/CIDRs (loopback, linklocal, uniquelocal)',
    )
    .transform(trustProxy),
  TASKLINE_MAX_UNFINISHED_TASKS: int(1),
  TASKLINE_MAX_STREAMS: int(1),
  TASKLINE_SSE_HEARTBEAT_MS: int(10),
  TASKLINE_SSE_RETRY_MS: int(0),
  TASKLINE_SSE_MAX_BUFFER_BYTES: int(1024),
  TASKLINE_SSE_HISTORY_PAGE_EVENTS: int(1),
  TASKLINE_SHUTDOWN_DEADLINE_MS: int(0),
  TASKLINE_HTTP_KEEPALIVE_MS: int(1000),
  TASKLINE_MCP_LOCAL_NO_AUTH: bool,
  TASKLINE_MCP_MAX_BODY_BYTES: int(1024),
  TASKLINE_MCP_ALLOWED_HOSTS: z.string().min(1),
  TASKLINE_MCP_LISTEN_MAX_TASKS: int(1).max(10000),
  TASKLINE_MCP_SESSION_TTL_S: int(1),
  TASKLINE_BATCH_CONFIRM_ABOVE_TOKENS: int(0),
  TASKLINE_ADMIN_KEYS: z
    .string()
    .regex(
      /^((sha256:[0-9a-f]{64}|[^,\s]{16,})(,(sha256:[0-9a-f]{64}|[^,\s]{16,}))*)?$/,
      'keys of 16+ characters or sha256:<hex>',
    ),
  TASKLINE_JWT_ADMIN_ROLE: z.string(),
  TASKLINE_JWT_ROLE_CLAIM: z.string().min(1),
  TASKLINE_OPERATOR_INDEX_MAX: int(100),
  TASKLINE_PROMETHEUS_URL: z.union([z.literal(''), z.string().url()]),
  TASKLINE_TRACE_URL_TEMPLATE: z.union([
    z.literal(''),
    z.string().url().includes('{trace_id}', { message: 'must contain {trace_id}' }),
  ]),
  TASKLINE_INPUT_TIMEOUT_S: int(1),
  TASKLINE_WEBHOOKS: bool,
  TASKLINE_WEBHOOK_ALLOW_HTTP: bool,
  TASKLINE_WEBHOOK_ALLOW_PRIVATE: bool,
  TASKLINE_WEBHOOK_TIMEOUT_MS: int(100),
  TASKLINE_WEBHOOK_MAX_RESPONSE_BYTES: int(1024),
  TASKLINE_WEBHOOK_RETRY_BASE_MS: int(10),
  TASKLINE_WEBHOOK_RETRY_CAP_MS: int(10),
  TASKLINE_WEBHOOK_MAX_ATTEMPTS: int(1).max(100),
  TASKLINE_WEBHOOK_DISABLE_AFTER: int(1),
  TASKLINE_WEBHOOK_CONCURRENCY: int(1).max(100),
  TASKLINE_WEBHOOK_RELAY_MS: int(10),
  TASKLINE_WEBHOOK_KEEP_S: int(60),
  TASKLINE_WEBHOOK_ROTATION_OVERLAP_S: int(0),
  TASKLINE_WEBHOOK_LINK_SECRET: z.union([z.literal(''), z.string().min(32)]),
  TASKLINE_PUBLIC_URL: z.union([z.literal(''), z.string().url()]),
  TASKLINE_WEBHOOK_LINK_TTL_S: int(60),
});

export type Env = z.infer<typeof schema>;

/** Thrown once, at start-up, naming every variable that is wrong. */
export class ConfigError extends Error {
  readonly code = 'invalid_config';
}

/** Reads every setting from `env` over the defaults, validated once; throws ConfigError on any bad value. */
export function loadEnv(env: NodeJS.ProcessEnv = process.env): Env {
  const merged: Record<string, string> = { ...DEFAULTS };
  /** Settings whose value came from a deprecated name, and that name: errors name what was set. */
  const setAs = new Map<string, string>();
  for (const [old, name] of Object.entries(DEPRECATED_NAMES)) {
    const value = env[old];
    if (value === undefined || value === '') continue;
    merged[name] = value;
    setAs.set(name, old);
  }
  for (const key of Object.keys(DEFAULTS)) {
    const value = env[key];
    if (value === undefined || value === '') continue;
    merged[key] = value;
    setAs.delete(key);
  }
  const parsed = schema.safeParse(merged);
  if (!parsed.success) {
    const named = (path: PropertyKey[]) => setAs.get(String(path[0])) ?? path.join('.');
    const problems = parsed.error.issues.map((i) => `${named(i.path)}: ${i.message}`).join('; ');
    throw new ConfigError(`invalid configuration: ${problems}`);
  }
  if (parsed.data.TASKLINE_EVENT_RETENTION_S > parsed.data.TASKLINE_TASK_RETENTION_S) {
    throw new ConfigError(
      'invalid configuration: TASKLINE_EVENT_RETENTION_S exceeds TASKLINE_TASK_RETENTION_S',
    );
  }
  if (parsed.data.TASKLINE_REDIS_COMMAND_TIMEOUT_MS <= parsed.data.TASKLINE_REPLICA_ACK_TIMEOUT_MS) {
    throw new ConfigError(
      "invalid configuration: TASKLINE_REDIS_COMMAND_TIMEOUT_MS must exceed TASKLINE_REPLICA_ACK_TIMEOUT_MS (a create's WAIT for replicas takes up to that long)",
    );
  }
  const jwt = parsed.data;
  if (
    (jwt.TASKLINE_JWT_PUBLIC_KEY || jwt.TASKLINE_JWT_JWKS_URL) &&
    !(jwt.TASKLINE_JWT_ISSUER && jwt.TASKLINE_JWT_AUDIENCE)
  ) {
    throw new ConfigError(
      'invalid configuration: JWT auth (TASKLINE_JWT_PUBLIC_KEY or TASKLINE_JWT_JWKS_URL) needs both TASKLINE_JWT_ISSUER and TASKLINE_JWT_AUDIENCE, so that a token minted for another audience is refused',
    );
  }
  if (parsed.data.TASKLINE_WEBHOOK_LINK_SECRET && !parsed.data.TASKLINE_PUBLIC_URL) {
    throw new ConfigError(
      'invalid configuration: TASKLINE_WEBHOOK_LINK_SECRET needs TASKLINE_PUBLIC_URL, the base of the answer links',
    );
  }
  const shared = sharedKey(parsed.data);
  if (shared) throw new ConfigError(`invalid configuration: ${shared}`);
  return parsed.data;
}

/**
 * A static key names one tenant and is never an operator's: the authenticators look a key up by
 * its SHA-256, so a key given to two tenants proved the last of them, and one in both lists
 * opened the console to a tenant. What is wrong is said without the key.
 */
function sharedKey(env: Pick<Env, 'TASKLINE_API_KEYS' | 'TASKLINE_ADMIN_KEYS'>): string | null {
  const sha256 = (key: string) => createHash('sha256').update(key).digest('hex');
  const tenants = new Map<string, string>();
  for (const pair of env.TASKLINE_API_KEYS.split(',').filter(Boolean)) {
    const at = pair.indexOf(':');
    const [tenant, hash] = [pair.slice(0, at), sha256(pair.slice(at + 1))];
    const other = tenants.get(hash);
    if (other !== undefined && other !== tenant)
      return `TASKLINE_API_KEYS gives one key to two tenants (${other} and ${tenant})`;
    tenants.set(hash, tenant);
  }
  for (const key of env.TASKLINE_ADMIN_KEYS.split(',').filter(Boolean)) {
    const tenant = tenants.get(key.startsWith('sha256:') ? key.slice('sha256:'.length) : sha256(key));
    if (tenant !== undefined)
      return `TASKLINE_ADMIN_KEYS holds the key TASKLINE_API_KEYS gives tenant ${tenant}: a tenant's key is never an operator's`;
  }
  return null;
}
