// @taskline/tracing: OpenTelemetry traces of a task across the api, scheduler and workers.
export { startTracing, tracingConfigured, TracingConfigError, type Tracing } from './setup.js';
export {
  activeSpan,
  ATTR,
  contextOf,
  inSpan,
  incomingTrace,
  lapsedAttemptLink,
  previousAttemptLink,
  recordInputWait,
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
