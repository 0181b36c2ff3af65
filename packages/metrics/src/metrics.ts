// Every Prometheus metric of every service, defined once.
import {
  Counter,
  Gauge,
  Histogram,
  Registry,
  collectDefaultMetrics,
  type HistogramConfiguration,
} from 'prom-client';
import { registerBuildInfo, type BuildInfo } from './build.js';
import { latencyHistogram, type ExemplarSource } from './exposition.js';
import { OTHER_TENANT, TenantLabels } from './tenants.js';

/**
 * Every metric of every service, defined here and nowhere else, so that dashboards, alerts
 * and the services agree on names, labels and buckets. Names follow Prometheus conventions:
 * `taskline_` prefix, base units (seconds), `_total` on counters.
 *
 * Label values must come from bounded sets: `route` is the Express route pattern (never the
 * raw path), `kind`/`model` are the deployed task kinds and models, `tenant` always goes
 * through `metrics.tenant()`.
 */

/** SLO thresholds; each is a histogram bucket boundary so `le="<threshold>"` exists. */
export const SLO_THRESHOLDS = {
  /** Time to first token of a generation task, seconds. */
  timeToFirstTokenSeconds: 2.5,
  /** Time a task waits in the queue before a worker claims it, seconds. */
  queueWaitSeconds: 30,
  /** Time from an event being stored to being written to a subscribed stream, seconds. */
  eventDeliverySeconds: 1,
} as const;

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const TTFT_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const QUEUE_WAIT_BUCKETS = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800];
const TASK_DURATION_BUCKETS = [0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600];
const TOKENS_PER_SECOND_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000];
const MODEL_LOAD_BUCKETS = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const REDIS_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5];

export interface MetricsOptions {
  /** `api`, `scheduler` or `gpu-worker`; added as the `service` label to every series. */
  service: string;
  /** How many tenants get their own label (TASKLINE_METRICS_TENANT_TOP_N); the rest are `other`. */
  tenantTopN: number;
  /** How often tenant slots are handed to the most active tenants; 0 disables the timer. */
  tenantRebalanceMs?: number;
  /** Node process metrics (CPU, memory, event loop lag, GC); on unless false. */
  defaultMetrics?: boolean;
  /** The process's log lines dropped for a stdout that lagged (@taskline/log's `droppedLogLines`). */
  logLinesDropped?: () => number;
  /** The process's build, reported as `taskline_build_info`. */
  build?: BuildInfo;
  /**
   * Where the latency histograms take exemplars from (@taskline/tracing's `Tracing.exemplar`: the
   * active trace); left out, they keep none and observe as plain histograms.
   */
  exemplars?: ExemplarSource;
}

function defineMetrics(registry: Registry, logLinesDropped: () => number, exemplar?: ExemplarSource) {
  const registers = [registry];
  const latency = <T extends string>(config: HistogramConfiguration<T>) =>
    latencyHistogram({ ...config, registers }, exemplar);
  return {
    logLinesDroppedTotal: new Counter({
      name: 'taskline_log_lines_dropped_total',
      help: "Log lines dropped because stdout's reader lagged and the backlog (TASKLINE_LOG_BUFFER_BYTES) was full.",
      registers,
      // The logger counts (it cannot depend on metrics); each scrape reads its count.
      collect() {
        this.reset();
        this.inc(logLinesDropped());
      },
    }),
    httpRequestsTotal: new Counter({
      name: 'taskline_http_requests_total',
      help: 'HTTP requests answered, by route pattern, method and status code.',
      labelNames: ['route', 'method', 'status'] as const,
      registers,
    }),
    httpRequestDurationSeconds: latency({
      name: 'taskline_http_request_duration_seconds',
      help: 'Time to answer an HTTP request (event streams excluded), by route pattern, method and status code.',
      labelNames: ['route', 'method', 'status'] as const,
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    taskCreatesTotal: new Counter({
      name: 'taskline_task_creates_total',
      help: 'Task create requests by protocol, tenant and outcome (accepted, rejected by validation, error).',
      labelNames: ['protocol', 'tenant', 'outcome'] as const,
      registers,
    }),
    webhookAttemptsTotal: new Counter({
      name: 'taskline_webhook_attempts_total',
      help: 'Webhook delivery attempts, by tenant and outcome (ok, failed).',
      labelNames: ['tenant', 'outcome'] as const,
      registers,
    }),
    webhookEndpointsDisabledTotal: new Counter({
      name: 'taskline_webhook_endpoints_disabled_total',
      help: 'Webhook endpoints disabled for failing TASKLINE_WEBHOOK_DISABLE_AFTER attempts in a row, by tenant.',
      labelNames: ['tenant'] as const,
      registers,
    }),
    taskTransitionsTotal: new Counter({
      name: 'taskline_task_transitions_total',
      help: 'Task state transitions, by task kind and the state entered.',
      labelNames: ['kind', 'state'] as const,
      registers,
    }),
    queueWaitSeconds: latency({
      name: 'taskline_task_queue_wait_seconds',
      help: 'Time from a task being queued to a worker claiming it (or starting it, where its claim comes with its first token).',
      labelNames: ['kind', 'model'] as const,
      buckets: QUEUE_WAIT_BUCKETS,
      registers,
    }),
    timeToFirstTokenSeconds: latency({
      name: 'taskline_task_time_to_first_token_seconds',
      help: 'Time from a task being created to its first output token.',
      labelNames: ['model'] as const,
      buckets: TTFT_BUCKETS,
      registers,
    }),
    outputTokensPerSecond: new Histogram({
      name: 'taskline_task_output_tokens_per_second',
      help: 'Decoding speed of one task attempt, output tokens per second after the first token.',
      labelNames: ['model'] as const,
      buckets: TOKENS_PER_SECOND_BUCKETS,
      registers,
    }),
    outputTokensTotal: new Counter({
      name: 'taskline_task_output_tokens_total',
      help: 'Output tokens generated, by model and tenant, counted as the model makes them.',
      labelNames: ['model', 'tenant'] as const,
      registers,
    }),
    taskDurationSeconds: latency({
      name: 'taskline_task_duration_seconds',
      help: 'End-to-end task time, from creation to a terminal state, by kind and final state.',
      labelNames: ['kind', 'state'] as const,
      buckets: TASK_DURATION_BUCKETS,
      registers,
    }),
    sseStreamsOpen: new Gauge({
      name: 'taskline_sse_streams_open',
      help: 'Server-sent event streams currently open, by protocol.',
      labelNames: ['protocol'] as const,
      registers,
    }),
    mcpListenersOpen: new Gauge({
      name: 'taskline_mcp_listeners_open',
      help: 'MCP task status listeners currently open.',
      registers,
    }),
    eventsDeliveredTotal: new Counter({
      name: 'taskline_events_delivered_total',
      help: 'Task events written to client streams, by protocol.',
      labelNames: ['protocol'] as const,
      registers,
    }),
    eventDeliverySeconds: latency({
      name: 'taskline_event_delivery_seconds',
      help: 'Time from a task event being stored to being written to a subscribed client stream (live events only).',
      labelNames: ['protocol'] as const,
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    workerSlots: new Gauge({
      name: 'taskline_worker_slots',
      help: 'Generation slots of this worker, by model and state (busy or free).',
      labelNames: ['model', 'state'] as const,
      registers,
    }),
    modelLoadSeconds: latency({
      name: 'taskline_model_load_seconds',
      help: 'Time to load a model into a worker.',
      labelNames: ['model'] as const,
      buckets: MODEL_LOAD_BUCKETS,
      registers,
    }),
    leasesExpiredTotal: new Counter({
      name: 'taskline_leases_expired_total',
      help: 'Worker leases that expired and whose tasks were recovered by the scheduler.',
      registers,
    }),
    restartPoliciesAppliedTotal: new Counter({
      name: 'taskline_restart_policies_applied_total',
      help: 'Recovery decisions applied to interrupted tasks, by kind and policy (e.g. resume, restart, fail).',
      labelNames: ['kind', 'policy'] as const,
      registers,
    }),
    redisUnavailableTotal: new Counter({
      name: 'taskline_redis_unavailable_total',
      help: 'Requests answered 503 because Redis said "try again" (oom, readonly, busy, masterdown, loading, connection...), by reason.',
      labelNames: ['reason'] as const,
      registers,
    }),
    redisCommandDurationSeconds: latency({
      name: 'taskline_redis_command_duration_seconds',
      help: 'Redis command or script latency as seen by the service, by command or script name.',
      labelNames: ['command'] as const,
      buckets: REDIS_BUCKETS,
      registers,
    }),
    queueDepth: new Gauge({
      name: 'taskline_queue_depth',
      help: 'Tasks waiting for a worker, by model and tenant.',
      labelNames: ['model', 'tenant'] as const,
      registers,
    }),
    schedulerLeader: new Gauge({
      name: 'taskline_scheduler_leader',
      help: "Whether this scheduler replica holds the leader lease (1) or stands by (0); autoscaling reads the leader's queue gauges only.",
      registers,
    }),
    tasksParked: new Gauge({
      name: 'taskline_tasks_parked',
      help: "Tasks waiting for their caller's input (input_required), parked: holding no worker slot and no lease.",
      registers,
    }),
    upstreamUp: new Gauge({
      name: 'taskline_upstream_up',
      help: "Whether a gateway tool worker's upstream MCP server is connected (1) or down (0), by configured upstream name.",
      labelNames: ['upstream'] as const,
      registers,
    }),
    queueOldestWaitSeconds: new Gauge({
      name: 'taskline_queue_oldest_wait_seconds',
      help: 'How long the oldest task waiting for dispatch has waited, by model and tenant (for autoscaling).',
      labelNames: ['model', 'tenant'] as const,
      registers,
    }),
  };
}

export type MetricHandles = ReturnType<typeof defineMetrics>;

export interface TasklineMetrics extends MetricHandles {
  readonly registry: Registry;
  readonly service: string;
  /** The bounded label for a tenant: itself while in the top N, else `other`. Counts as activity. */
  tenant(tenant: string): string;
  /**
   * Replaces the queue depth series of `model` with `depths` (tenant -> waiting tasks),
   * summing tenants outside the top N into `other` and dropping tenants no longer waiting.
   */
  setQueueDepth(model: string, depths: Iterable<readonly [string, number]>): void;
  /**
   * Replaces the oldest-wait series of `model` with `waits` (tenant -> seconds the oldest waiting
   * task has waited); tenants outside the top N share `other`, which shows the longest of them.
   */
  setQueueWait(model: string, waits: Iterable<readonly [string, number]>): void;
  /** `TaskStore`'s `onTransition`: counts the transition and times a task that ended from its creation. */
  transitioned(change: TransitionChange): void;
  /** Hands tenant labels to the most active tenants and deletes the series of those demoted. */
  rebalanceTenants(): Promise<string[]>;
  /** Stops the rebalance timer. */
  close(): void;
}

/** A state change as `TaskStore`'s `onTransition` reports it. */
export interface TransitionChange {
  kind: string;
  state: string;
  terminal: boolean;
  /** When the task was created (ms since epoch). */
  createdAt: number;
}

/** Builds a fresh registry holding every Taskline metric; one per process. */
export function createMetrics(options: MetricsOptions): TasklineMetrics {
  const registry = new Registry();
  registry.setDefaultLabels({ service: options.service });
  if (options.defaultMetrics !== false) collectDefaultMetrics({ register: registry });
  const handles = defineMetrics(registry, options.logLinesDropped ?? (() => 0), options.exemplars);
  if (options.build) registerBuildInfo(registry, options.build);
  const tenants = new TenantLabels(options.tenantTopN);
  const tenantMetrics = [
    handles.taskCreatesTotal,
    handles.outputTokensTotal,
    handles.queueDepth,
    handles.queueOldestWaitSeconds,
  ];
  const depthSeries = new Map<string, Set<string>>();
  const waitSeries = new Map<string, Set<string>>();

  const setQueueDepth = (model: string, depths: Iterable<readonly [string, number]>) => {
    const sums = new Map<string, number>();
    for (const [tenant, depth] of depths) {
      // Weight by depth so the tenants with the biggest backlogs win the labels.
      const label = tenants.label(tenant, depth);
      sums.set(label, (sums.get(label) ?? 0) + depth);
    }
    setPerTenant(handles.queueDepth, depthSeries, model, sums);
  };

  const setQueueWait = (model: string, waits: Iterable<readonly [string, number]>) => {
    const oldest = new Map<string, number>();
    for (const [tenant, seconds] of waits) {
      // Only looks: the depth already counted this backlog as the tenant's activity.
      const label = tenants.label(tenant, 0);
      oldest.set(label, Math.max(oldest.get(label) ?? 0, seconds));
    }
    setPerTenant(handles.queueOldestWaitSeconds, waitSeries, model, oldest);
  };

  const transitioned = (change: TransitionChange) => {
    handles.taskTransitionsTotal.inc({ kind: change.kind, state: change.state });
    if (change.terminal)
      handles.taskDurationSeconds.observe(
        { kind: change.kind, state: change.state },
        Math.max(0, (Date.now() - change.createdAt) / 1000),
      );
  };

  const rebalanceTenants = async () => {
    const demoted = tenants.rebalance();
    if (demoted.length === 0) return demoted;
    await dropTenantSeries(tenantMetrics, new Set(demoted));
    for (const byModel of [depthSeries, waitSeries])
      for (const series of byModel.values()) for (const t of demoted) series.delete(t);
    return demoted;
  };

  const period = options.tenantRebalanceMs ?? 60_000;
  const timer = period > 0 ? setInterval(() => void rebalanceTenants(), period) : undefined;
  timer?.unref();

  return {
    ...handles,
    registry,
    service: options.service,
    tenant: (tenant) => tenants.label(tenant),
    setQueueDepth,
    setQueueWait,
    transitioned,
    rebalanceTenants,
    close: () => clearInterval(timer),
  };
}

/** Sets one gauge's series of `model` per tenant label, removing the labels no longer present. */
function setPerTenant(
  gauge: Gauge,
  series: Map<string, Set<string>>,
  model: string,
  values: Map<string, number>,
): void {
  for (const stale of series.get(model) ?? []) {
    if (!values.has(stale)) gauge.remove({ model, tenant: stale });
  }
  for (const [tenant, value] of values) gauge.set({ model, tenant }, value);
  series.set(model, new Set(values.keys()));
}

/** Removes every series of the demoted tenants from the metrics labelled by tenant. */
async function dropTenantSeries(
  tenantMetrics: { get(): Promise<{ values: { labels: Record<string, unknown> }[] }> }[],
  gone: Set<string>,
): Promise<void> {
  for (const metric of tenantMetrics) {
    const { values } = await metric.get();
    for (const { labels } of values) {
      if (typeof labels.tenant !== 'string' || !gone.has(labels.tenant)) continue;
      // The demoted tenant's counts leave its series; Prometheus sees a counter reset there,
      // and future activity lands in `other`, so rate() over `tenant` sums stays right.
      const { le: _le, service: _service, ...own } = labels as Record<string, string | number>;
      (metric as unknown as { remove(labels: Record<string, string | number>): void }).remove(own);
    }
  }
}

export { OTHER_TENANT };
