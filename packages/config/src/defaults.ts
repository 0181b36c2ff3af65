/**
 * Every default of every service, in one place. Each key is the environment variable that
 * overrides it; `loadEnv` validates them once at start-up.
 */
export const DEFAULTS = {
  /** Where the services find Redis. The local stack (`pnpm start`) starts its own with AOF. */
  REDIS_URL: 'redis://127.0.0.1:6390',
  /**
   * A Redis Cluster instead: `host:port` seed nodes, comma separated (the client learns the rest;
   * an IPv6 host bracketed or not).
   * When set, `REDIS_URL` is not used. `REDIS_URL` may name a cluster too, by one seed:
   * `redis-cluster://[user:password@]host:port` (`rediss-cluster://` with TLS).
   */
  TASKLINE_REDIS_CLUSTER_NODES: '',
  /** The cluster's ACL user and password (managed clusters); empty for none. */
  TASKLINE_REDIS_USERNAME: '',
  TASKLINE_REDIS_PASSWORD: '',
  /** TLS to every cluster node (managed clusters usually require it). */
  TASKLINE_REDIS_TLS: 'false',
  /** Refuse to start against a Redis without AOF: an acknowledged task must survive a crash. */
  TASKLINE_REQUIRE_AOF: 'true',
  /**
   * What an acknowledged write survives. `always`: every write is on disk before Redis replies, so
   * nothing acknowledged is lost even on a power loss (Redis must run `appendfsync always`).
   * `everysec` (an operator's opt-in): up to about a second of acknowledged writes can be lost on a
   * power loss or kernel crash. The services refuse a Redis whose `appendfsync` promises less.
   */
  TASKLINE_DURABILITY: 'always',
  /**
   * With replicas connected to Redis, an acknowledged create, cancel or answer waits this long for
   * every one of them to have it (`WAIT`); past it the request gets 503 `replication_timeout`.
   */
  TASKLINE_REPLICA_ACK_TIMEOUT_MS: '1000',
  /**
   * The api's bound on one Redis command: a Redis that stops answering without closing its
   * connections (stalled, or cut off mid-network) gets requests a 503 `unavailable` (reason
   * `timeout`) after this long instead of a hang. Longer than a create's `WAIT` for replicas.
   */
  TASKLINE_REDIS_COMMAND_TIMEOUT_MS: '5000',
  TASKLINE_LOG_LEVEL: 'info',
  /** The source revision a process was built from, set by the images (`taskline_build_info`, `/healthz`). */
  TASKLINE_BUILD_REVISION: '',
  /**
   * Bytes of log lines a service holds for a stdout whose reader lags (a slow log shipper, a full
   * pipe): logging never waits for it; past this, lines are dropped and counted
   * (`taskline_log_lines_dropped_total`, and one `log_lines_dropped` line once stdout drains).
   */
  TASKLINE_LOG_BUFFER_BYTES: String(8 * 1024 * 1024),

  TASKLINE_HOST: '127.0.0.1',
  TASKLINE_PORT: '8080',

  /** Terminal tasks are kept this long after they end, then read as never having existed. */
  TASKLINE_TASK_RETENTION_S: String(24 * 3600),
  /** Event history of a terminal task; never longer than the task itself. */
  TASKLINE_EVENT_RETENTION_S: String(24 * 3600),
  /** LMSP 1.0 section 9.2 (docs/lmsp.md): idempotency keys are kept at least 24 h. */
  TASKLINE_IDEMPOTENCY_TTL_S: String(24 * 3600),
  /** How long a half-finished create holds its idempotency key before another request may take over. */
  TASKLINE_IDEMPOTENCY_PENDING_MS: '30000',
  /** Suggested polling interval for clients (MCP `pollIntervalMs`). */
  TASKLINE_POLL_INTERVAL_MS: '1000',

  /** A worker's lease on a task; renewed every third of it. */
  TASKLINE_LEASE_MS: '6000',
  /** How often the scheduler looks for expired leases: a dead worker's tasks are recovered within lease + this. */
  TASKLINE_RECOVERY_INTERVAL_MS: '2000',
  /**
   * api: a call its caller holds open (a keyless, non-background `POST /responses`, an MCP tool call
   * not held as a task) is cancelled when the caller goes. Should the api replica holding it go
   * too, the scheduler cancels its task once this lease lapses (the replica renews it every third).
   */
  TASKLINE_CALLER_LEASE_MS: '15000',
  /** A task persisted this long without a queue entry is queued by the reconciler. */
  TASKLINE_RECONCILE_AFTER_MS: '10000',
  /**
   * Scheduler control plane (gRPC): where a replica listens, and the address it gives workers
   * (default host:port). An IPv6 host may come unbracketed (`$(POD_IP):7070`): the last `:port` is the port.
   */
  TASKLINE_CONTROL_HOST: '127.0.0.1',
  TASKLINE_CONTROL_PORT: '7070',
  TASKLINE_CONTROL_ADVERTISE: '',
  /**
   * Control-plane credential: a shared token (32+ characters) workers send and the scheduler
   * checks in constant time. Comma separated during a rotation: the scheduler accepts each, a
   * worker sends the first (README, "Control plane"; the chart README says how to rotate).
   * Empty: client certificates must authenticate workers instead.
   */
  TASKLINE_CONTROL_TOKEN: '',
  /**
   * TLS of the control plane (PEM files). Scheduler: its certificate and key, and with a CA, client
   * certificates signed by it are required. Worker: the CA it trusts for the scheduler (empty: the
   * system's), and its client certificate and key if any; the server name overrides the one the
   * scheduler's certificate must carry (workers dial pod IPs).
   */
  TASKLINE_CONTROL_TLS_CA: '',
  TASKLINE_CONTROL_TLS_CERT: '',
  TASKLINE_CONTROL_TLS_KEY: '',
  TASKLINE_CONTROL_TLS_SERVER_NAME: '',
  /**
   * The control plane without TLS: the token then crosses the network in the clear. Only an
   * explicit opt-in (a loopback-only `pnpm start`, tests); scheduler and worker refuse otherwise.
   */
  TASKLINE_CONTROL_PLAINTEXT: 'false',
  /** Scheduler control addresses a worker tries in order (comma separated); standbys redirect to the leader. */
  TASKLINE_SCHEDULER_ADDR: '127.0.0.1:7070',
  /** Scheduler leadership lease in Redis; a standby takes over within this after the leader dies. */
  TASKLINE_LEADER_LEASE_MS: '5000',
  /** Worker heartbeat interval; a worker silent for the timeout no longer counts as capacity. */
  TASKLINE_HEARTBEAT_MS: '1000',
  TASKLINE_WORKER_TIMEOUT_MS: '5000',
  /** How often the leader runs a dispatch round, and how many tasks a tenant gets per round per unit of weight. */
  TASKLINE_DISPATCH_INTERVAL_MS: '200',
  TASKLINE_DISPATCH_QUANTUM: '1',
  /**
   * Fair-share weights, `tenant:weight,...` (others weigh 1; each weight 1 or more: a 0, which would
   * never dispatch the tenant, is refused at start-up), and the cap on each tenant's dispatched,
   * unfinished tasks.
   */
  TASKLINE_TENANT_WEIGHTS: '',
  TASKLINE_TENANT_MAX_RUNNING: '64',
  /**
   * How often the scheduler sweeps its indexes: the running sets (entries of tasks that ended or
   * expired, lost jobs) and the operator and MCP task indexes. Was TASKLINE_RETENTION_SWEEP_MS.
   */
  TASKLINE_INDEX_SWEEP_MS: '30000',
  /** gpu-worker: model folder, served model ids (`instant` is the benchmark-only no-op model), slots per model. */
  TASKLINE_MODELS_DIR: 'models',
  TASKLINE_WORKER_MODELS: 'tiny-chat',
  TASKLINE_WORKER_SLOTS: '4',
  /** Memory budget for loaded models; the least recently used are evicted beyond it. */
  TASKLINE_MODEL_MEMORY_MB: '2048',
  /** onnxruntime execution provider: `cpu`, or `cuda` on GPU images. */
  TASKLINE_EXECUTION_PROVIDER: 'cpu',
  /** onnxruntime threads per model session; 0 lets onnxruntime choose (one per core). */
  TASKLINE_INTRA_OP_THREADS: '0',
  /**
   * gpu-worker: positions one prefill session.run is fed, every prompt prefilled together counted
   * (and no more prompts than this together). A model returns logits for each position it is fed,
   * though a prefill uses only each prompt's last: a run's logits are at most this many times the
   * vocabulary (512 x 150k float32 values, about 300 MB), where a whole 4k-token prompt would be
   * 2.4 GB, and eight of them together eight times that. Smaller saves memory; larger can prefill
   * faster, in fewer runs.
   */
  TASKLINE_PREFILL_CHUNK_TOKENS: '512',
  /**
   * SIGTERM or a drain command: running tasks get this long to finish; what is still running then
   * gets its `on_restart` policy (LMSP 7.5), as after a crash. Keep it under the pod's grace period.
   */
  TASKLINE_DRAIN_DEADLINE_MS: '20000',
  /**
   * Runs a task gets in all, counting interruptions only (an answered input request resumes a
   * tool task but interrupts nothing). The interruption of its last run (its worker or model
   * thread died, or a drain cut it short) ends it `failed` with `server_restarted` whatever its
   * `on_restart`, so a task that kills its worker (out of memory, say) does not take down one
   * worker after another forever. LMSP 1.0 section 7.5 sets no cap: docs/lmsp.md says why we do.
   */
  TASKLINE_MAX_ATTEMPTS: '5',
  /**
   * gpu-worker: lower bound on the time of one decode step. 0 in production; tests and demos raise it
   * so that a fast model's generations last long enough to be cancelled, killed or drained midway.
   */
  TASKLINE_WORKER_MIN_STEP_MS: '0',
  /**
   * gpu-worker: the tick of its one flush clock. The first delta of a generation goes out at once;
   * later tokens made meanwhile travel together on the next tick, every generation's at the same
   * time, so Redis, the api and clients handle one write per generation a tick, whatever the
   * model's token rate (a 5 ms tick cost about 1.3 Redis commands per token of tiny-chat).
   */
  TASKLINE_STREAM_FLUSH_MS: '50',
  /**
   * gpu-worker: BullMQ workers per model, its slots shared out among them. One BullMQ worker takes
   * jobs one round trip after another; several take a burst of jobs (a batch of requests) in
   * parallel. Each holds its own Redis connections.
   */
  TASKLINE_WORKER_FETCHERS: '4',
  /** This worker's name in leases, logs and the control plane; empty picks `worker-<random>`. */
  TASKLINE_WORKER_ID: '',
  /**
   * tool-worker: the module whose exported tools it serves (`taskline tool-worker --module` sets
   * it); empty only for a worker started programmatically with its tools.
   */
  TASKLINE_TOOL_MODULE: '',
  /** tool-worker: `*` (every tenant sees its tools) or the comma separated tenants that alone do. */
  TASKLINE_TOOL_TENANTS: '*',
  /** tool-worker: the version its tools are listed with; empty: a hash of each tool's schemas. */
  TASKLINE_TOOL_VERSION: '',
  /** tool-worker: tasks of each tool it runs at once, over every tool's own `concurrency`; 0 keeps each tool's. */
  TASKLINE_TOOL_CONCURRENCY: '0',
  /**
   * tool-worker: how long its registry entry lives without a refresh (it refreshes every third of
   * it): a dead worker's tools leave every api's `tools/list` within this time.
   */
  TASKLINE_TOOL_REGISTRY_TTL_MS: '6000',
  /**
   * tool-worker: how long its tools stay deployed (listed and callable, calls queued) after the
   * last worker serving them announced them, so a pool scaled to zero gets a backlog to scale on;
   * 0: a tool leaves every list with its last worker. 7 days.
   */
  TASKLINE_TOOL_DEPLOYED_RETENTION_MS: '604800000',
  /** Largest `ctx.checkpoint` state a tool may store (its JSON, bytes); a larger one fails the call. */
  TASKLINE_TOOL_CHECKPOINT_MAX_BYTES: '1048576',
  /** api: how long a replica reuses the live tool registry it read (0: read it on every request). */
  TASKLINE_TOOL_LIST_CACHE_MS: '1000',
  /**
   * tool-worker as a gateway: the upstream MCP servers whose tools it serves (JSON, docs/gateway.md);
   * `--upstreams <file>` wins. Empty: no upstreams.
   */
  TASKLINE_UPSTREAMS: '',
  /** gateway: how long one upstream `tools/call` may take, unless its upstream sets `timeoutMs`. */
  TASKLINE_UPSTREAM_TIMEOUT_MS: '300000',
  /** gateway: largest upstream result (its JSON, bytes) a task keeps; a larger one fails the task. */
  TASKLINE_UPSTREAM_MAX_RESULT_BYTES: '1048576',
  /** Tenants that get their own `tenant` label on metrics; the rest are aggregated as `other`. */
  TASKLINE_METRICS_TENANT_TOP_N: '20',
  /**
   * `/metrics` port of every service (the api's metrics never share its client port: they name
   * tenants); 0 picks a free one.
   */
  TASKLINE_METRICS_PORT: '9464',
  /** LMSP models served (comma separated ids); every other model id is `model_not_found`. */
  TASKLINE_MODELS: 'tiny-chat',
  /** Models whose backend can snapshot, so tasks on them may use `on_restart: resume`. */
  TASKLINE_SNAPSHOT_MODELS: 'tiny-chat',
  /** The model MCP `generate`/`batch_generate` use when a call names none; empty: callers must name one. */
  TASKLINE_DEFAULT_MODEL: '',
  /**
   * Static API keys for local use, `tenant:key,tenant:key`; keys made by the CLI live hashed in Redis.
   * A key names one tenant and is never also in TASKLINE_ADMIN_KEYS (start-up refuses either).
   */
  TASKLINE_API_KEYS: '',
  /** JWT bearer tokens: verified against a PEM (SPKI) public key or a JWKS URL; empty turns JWTs off. */
  TASKLINE_JWT_PUBLIC_KEY: '',
  TASKLINE_JWT_JWKS_URL: '',
  /**
   * The claim that names the tenant. With JWT auth on, issuer and audience must be set (start-up
   * refuses otherwise) and every token must carry `exp`: a token minted for another service of the
   * same identity provider, or one that never expires, is refused.
   */
  TASKLINE_JWT_TENANT_CLAIM: 'tenant',
  TASKLINE_JWT_ISSUER: '',
  TASKLINE_JWT_AUDIENCE: '',
  /**
   * JWT signature algorithms accepted, comma separated; a token signed otherwise is refused.
   * Asymmetric only (RS*, PS*, ES*, EdDSA): HS* would take the public key for a shared secret,
   * and `none` signs nothing; start-up refuses both.
   */
  TASKLINE_JWT_ALGORITHMS: 'RS256,ES256,EdDSA',
  /** Clock skew forgiven when checking a JWT's `exp` and `nbf`, seconds. */
  TASKLINE_JWT_CLOCK_TOLERANCE_S: '30',
  /** Largest request body the API parses; larger ones get `413 payload_too_large`. */
  TASKLINE_MAX_BODY_BYTES: String(1024 * 1024),
  /** Upper bound (and default) of `max_output_tokens`. */
  TASKLINE_MAX_OUTPUT_TOKENS: '4096',
  /** Per-tenant request rate (token bucket in Redis, shared by every replica): refill per second and burst. */
  TASKLINE_RATE_LIMIT_PER_S: '20',
  TASKLINE_RATE_LIMIT_BURST: '100',
  /**
   * Failed authentications (a bearer token that proves nothing) allowed per client address (an
   * IPv6 one by its /64) in a window of TASKLINE_AUTH_FAILURE_WINDOW_S seconds, counted in Redis
   * across every replica. Past them every request from the address is refused (`429
   * too_many_auth_failures`), a good key's too, before any key or JWT is checked, until the window
   * ends. A request with no Authorization header is neither counted nor refused.
   */
  TASKLINE_AUTH_FAILURE_LIMIT: '20',
  TASKLINE_AUTH_FAILURE_WINDOW_S: '60',
  /**
   * Which proxies' X-Forwarded-For to believe for the client address (Express `trust proxy`):
   * `false` (the peer's own address), `true` (the header's first address: only behind a proxy that
   * overwrites it), a number of proxy hops, or addresses and CIDRs, comma separated, where
   * `loopback`, `linklocal` and `uniquelocal` name those ranges. Behind a load balancer, without
   * it every client is the balancer's address and shares one count of failed authentications.
   */
  TASKLINE_TRUST_PROXY: 'false',
  /**
   * Per-tenant caps across every replica: unfinished tasks (not yet ended, whatever their state;
   * was TASKLINE_MAX_ACTIVE_TASKS), and open event streams.
   */
  TASKLINE_MAX_UNFINISHED_TASKS: '100',
  TASKLINE_MAX_STREAMS: '50',
  /** SSE comment interval that keeps idle streams open through proxies; also the open-stream lease. */
  TASKLINE_SSE_HEARTBEAT_MS: '15000',
  /** The `retry:` hint sent when a replica ends a stream on shutdown. */
  TASKLINE_SSE_RETRY_MS: '1000',
  /**
   * Bytes an SSE reader may fall behind before its stream is ended with a `retry:` hint: a slow
   * client costs bounded memory and resumes with Last-Event-ID, losing nothing.
   */
  TASKLINE_SSE_MAX_BUFFER_BYTES: String(1024 * 1024),
  /**
   * Events read from Redis at a time for a reader of a finished task's history, the next page once
   * the reader has taken the last: a reader that stops reading holds one page, not the history.
   */
  TASKLINE_SSE_HISTORY_PAGE_EVENTS: '256',
  /** SIGTERM: in-flight requests get this long to finish before the API exits anyway. */
  TASKLINE_SHUTDOWN_DEADLINE_MS: '10000',
  /**
   * How long the api keeps an idle client connection open (Node.js's `keepAliveTimeout`, 5 s by
   * default), and every service's metrics listener a scraper's. Longer than the idle timeout of
   * whatever pools connections in front: 60 s for AWS's ALB and ingress-nginx's upstream
   * keep-alive; Google Cloud's load balancers keep theirs 600 s, so set 620000 there. A client or
   * balancer that reuses a connection the server has just closed fails (a 502 at a balancer).
   */
  TASKLINE_HTTP_KEEPALIVE_MS: '65000',
  /** MCP without auth: every caller is the one tenant `local`. Only for local runs (the conformance suite). */
  TASKLINE_MCP_LOCAL_NO_AUTH: 'false',
  /** MCP request body limit, bytes (the SDK's own bound is 4 MiB). */
  TASKLINE_MCP_MAX_BODY_BYTES: String(1024 * 1024),
  /** Host names the MCP endpoint answers (DNS rebinding protection), comma-separated. */
  TASKLINE_MCP_ALLOWED_HOSTS: 'localhost,127.0.0.1,[::1]',
  /** MCP `subscriptions/listen`: distinct task ids one listen may follow (more is -32602). */
  TASKLINE_MCP_LISTEN_MAX_TASKS: '100',
  /** Idle lifetime (s) of a 2025-era MCP session (`Mcp-Session-Id`), kept in Redis. */
  TASKLINE_MCP_SESSION_TTL_S: '3600',
  /** MCP `batch_generate`: estimated tokens above which a batch asks the caller to confirm first. */
  TASKLINE_BATCH_CONFIRM_ABOVE_TOKENS: '20000',
  /**
   * Operator console (`/console`, `/admin/v1`): operator keys, comma separated, each a key of 16+
   * characters or `sha256:<hex>` of one (held hashed either way, like API keys). Empty: no key signs in.
   */
  TASKLINE_ADMIN_KEYS: '',
  /** A verified JWT (TASKLINE_JWT_*) whose claim `TASKLINE_JWT_ROLE_CLAIM` holds this role is an operator; empty turns that off. */
  TASKLINE_JWT_ADMIN_ROLE: '',
  TASKLINE_JWT_ROLE_CLAIM: 'role',
  /**
   * Most recent tasks the operator index keeps per tenant (older entries drop off; the tasks stay
   * reachable by id); MCP's `tasks/list` keeps as many ended tool tasks, and every unfinished one.
   */
  TASKLINE_OPERATOR_INDEX_MAX: '10000',
  /** Prometheus the console reads SLO burn rates from (e.g. `http://prometheus:9090`); empty: "not configured". */
  TASKLINE_PROMETHEUS_URL: '',
  /**
   * The console's link to a task's trace in the tracing UI the operators use: `{trace_id}` is
   * replaced by the task's trace id (e.g. `https://tempo.example/explore?traceId={trace_id}`).
   * Empty: the trace id is shown as text. Tracing itself is configured by OTEL_* (docs/tracing.md).
   */
  TASKLINE_TRACE_URL_TEMPLATE: '',
  /**
   * MCP tool tasks: how long a task waits for its caller's answers (`input_required`, parked: no
   * worker slot, no lease) before it fails with `input_timeout`, seconds. A day by default.
   */
  TASKLINE_INPUT_TIMEOUT_S: '86400',
  /**
   * Webhooks (docs/webhooks.md). The scheduler runs the relay and the delivery workers unless
   * this is false (then run them in another scheduler deployment, or nowhere: no delivery).
   */
  TASKLINE_WEBHOOKS: 'true',
  /** Endpoints on plain http (tests, a trusted network); https only otherwise. */
  TASKLINE_WEBHOOK_ALLOW_HTTP: 'false',
  /** Endpoints on private, loopback, link-local or other non-public addresses. */
  TASKLINE_WEBHOOK_ALLOW_PRIVATE: 'false',
  /** One delivery attempt, connect to the last byte read, ms. */
  TASKLINE_WEBHOOK_TIMEOUT_MS: '10000',
  /** Response bytes an attempt reads at most (the log keeps the first 512 characters). */
  TASKLINE_WEBHOOK_MAX_RESPONSE_BYTES: '65536',
  /** Retries: attempt n + 1 after min(base * 2^(n-1), cap) ms, jittered by a fifth either way. */
  TASKLINE_WEBHOOK_RETRY_BASE_MS: '5000',
  TASKLINE_WEBHOOK_RETRY_CAP_MS: '3600000',
  /** Attempts of one delivery before it is given up (15: about 5.4 hours of retries). */
  TASKLINE_WEBHOOK_MAX_ATTEMPTS: '15',
  /** Failed attempts in a row that disable an endpoint (its tenant is told; re-enable to resume). */
  TASKLINE_WEBHOOK_DISABLE_AFTER: '100',
  /** Attempts in flight per endpoint. */
  TASKLINE_WEBHOOK_CONCURRENCY: '4',
  /** Between relay passes over the hooked tasks' outboxes, ms. */
  TASKLINE_WEBHOOK_RELAY_MS: '200',
  /** How long a message is kept for manual redelivery, seconds (3 days). */
  TASKLINE_WEBHOOK_KEEP_S: '259200',
  /** How long the old secret of a rotation keeps signing beside the new one, seconds. */
  TASKLINE_WEBHOOK_ROTATION_OVERLAP_S: '86400',
  /**
   * Signs answer links (32+ characters; the api and the scheduler need the same). Empty: no
   * `input_required` delivery carries links.
   */
  TASKLINE_WEBHOOK_LINK_SECRET: '',
  /** Where clients reach the api (e.g. `https://taskline.example.com`): the base of answer links. */
  TASKLINE_PUBLIC_URL: '',
  /** How long an answer link works at most, seconds (never past its question's deadline). */
  TASKLINE_WEBHOOK_LINK_TTL_S: '86400',
} as const;

/**
 * Settings renamed so that each name has one meaning, by their deprecated names: still read when
 * the new name is not set (the new one wins when both are), validated as the new name.
 */
export const DEPRECATED_NAMES: Readonly<Record<string, keyof typeof DEFAULTS>> = {
  TASKLINE_MAX_ACTIVE_TASKS: 'TASKLINE_MAX_UNFINISHED_TASKS',
  TASKLINE_RETENTION_SWEEP_MS: 'TASKLINE_INDEX_SWEEP_MS',
};
