// The face of @taskline/metrics: every metric, its HTTP handler and the tenant labels.
export {
  createMetrics,
  SLO_THRESHOLDS,
  OTHER_TENANT,
  type TasklineMetrics,
  type MetricHandles,
  type MetricsOptions,
  type TransitionChange,
} from './metrics.js';
export { TenantLabels } from './tenants.js';
export {
  metricsHandler,
  httpMetrics,
  startMetricsServer,
  UNMATCHED_ROUTE,
  type HttpMetricsOptions,
  type MetricsServer,
  type ProbeHandlers,
} from './http.js';
export { buildInfo, type BuildInfo } from './build.js';
