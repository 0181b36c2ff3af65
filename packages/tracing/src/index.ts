// @taskline/tracing: OpenTelemetry traces of a task across the api, scheduler and workers.
export {
  startTracing,
  samplerFromEnv,
  tracingConfigured,
  TracingConfigError,
  type Tracing,
} from './setup.js';
export {
  activeSpan,
  ATTR,
  contextOf,
  inSpan,
  incomingTrace,
  recordSpan,
  SpanKind,
  taskAttributes,
  timeGeneration,
  traceIdOf,
  traceparentOf,
  tracer,
  tracingOn,
  type Context,
  type IncomingTrace,
  type Span,
  type SpanOptions,
} from './spans.js';
