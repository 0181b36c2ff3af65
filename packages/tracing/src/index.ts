// @taskline/tracing: OpenTelemetry traces of a task across the api, scheduler and workers.
export { startTracing, tracingConfigured } from './setup.js';
export { TracingConfigError, type Tracing } from './types.js';
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
