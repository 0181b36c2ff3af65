// A task's spans: its stored trace context, the attributes every span carries, spans run around work.
import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
} from '@opentelemetry/api';

export { SpanKind, type Span, type Context, type Link } from '@opentelemetry/api';

/** Attribute names of a task's spans; values are ids and counts, never prompt or output text. */
export const ATTR = {
  taskId: 'taskline.task.id',
  tenant: 'taskline.tenant',
  model: 'taskline.model',
  attempt: 'taskline.attempt',
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
  outcome: 'taskline.outcome',
  policy: 'taskline.restart.policy',
  /** On a link: what the linked span is to this one (`previous_attempt`, `lapsed_attempt`, `parked_attempt`). */
  link: 'taskline.link',
} as const;

/** The one tracer of the process: the no-op one until `startTracing` registers a provider. */
export function tracer() {
  return trace.getTracer('taskline');
}

/** The span active here (undefined when none records): work adds what it learns to it. */
export function activeSpan(): Span | undefined {
  const span = trace.getActiveSpan();
  return span?.isRecording() ? span : undefined;
}

/** A task's identifying attributes. */
export function taskAttributes(task: {
  id: string;
  tenant: string;
  model: string;
  attempt?: number;
}): Attributes {
  return {
    [ATTR.taskId]: task.id,
    [ATTR.tenant]: task.tenant,
    [ATTR.model]: task.model,
    ...(task.attempt !== undefined && { [ATTR.attempt]: task.attempt }),
  };
}

/** The context a W3C `traceparent` (and `tracestate`) names, over the root context. */
export function contextOf(traceparent: string | null | undefined, tracestate?: string | null): Context {
  if (!traceparent) return ROOT_CONTEXT;
  const carrier: Record<string, string> = { traceparent };
  if (tracestate) carrier.tracestate = tracestate;
  return propagation.extract(ROOT_CONTEXT, carrier);
}

/** The W3C `traceparent` of a recording span, to store or send on; undefined when not traced. */
export function traceparentOf(span: Span | undefined): string | undefined {
  if (!span?.isRecording()) return undefined;
  const carrier: Record<string, string> = {};
  propagation.inject(trace.setSpan(ROOT_CONTEXT, span), carrier);
  return carrier.traceparent;
}

/** The trace id a `traceparent` names (its second field). */
export function traceIdOf(traceparent: string | null | undefined): string | null {
  return traceparent ? (traceparent.split('-')[1] ?? null) : null;
}

/**
 * A link to the span a stored `traceparent` names, saying what it is; none when there is no
 * context (that span was not traced). A link, not a parent: the span it names is in the same
 * trace but did not cause this one.
 */
function linkTo(traceparent: string | null | undefined, kind: string): Link[] {
  const spanContext = traceparent ? trace.getSpanContext(contextOf(traceparent)) : undefined;
  return spanContext ? [{ context: spanContext, attributes: { [ATTR.link]: kind } }] : [];
}

/** A new attempt's link to the task's attempt before it (a restart's, or the one that parked). */
export const previousAttemptLink = (traceparent: string | null | undefined) =>
  linkTo(traceparent, 'previous_attempt');

/** A restart's link to the attempt whose lease lapsed. */
export const lapsedAttemptLink = (traceparent: string | null | undefined) =>
  linkTo(traceparent, 'lapsed_attempt');

/** An input wait's link to the attempt that parked for the input. */
const parkedAttemptLink = (traceparent: string | null | undefined) => linkTo(traceparent, 'parked_attempt');

/**
 * A span recorded once its work is over (its start known only then: a restart, an input wait),
 * under a task's stored context; nothing when the task has none.
 */
export function recordSpan(
  name: string,
  traceparent: string | null | undefined,
  attributes: Attributes,
  options: { startTime?: number; links?: Link[] } = {},
): void {
  if (!traceparent) return;
  const { startTime = Date.now(), links } = options;
  tracer().startSpan(name, { startTime, attributes, links }, contextOf(traceparent)).end();
}

/** What `recordInputWait` reads of a task as it was before the answer (a TaskRecord). */
export interface WaitingTask {
  id: string;
  tenant: string;
  model: string;
  attempt: number;
  status: string;
  traceparent: string | null;
  /** The attempt that parked (its claim's context). */
  attemptTraceparent: string | null;
  /** When the record last changed: the park, while the task waits for input. */
  updatedAt: number;
}

/**
 * The wait for a caller's input that an answer ended, as a `task.input_wait` span from the park to
 * now, linked to the attempt that parked; nothing when the task did not wait (`before`) or still
 * does (`after`, an answer of several).
 */
export function recordInputWait(before: WaitingTask, after: string): void {
  if (before.status !== 'input_required' || after === 'input_required') return;
  const links = parkedAttemptLink(before.attemptTraceparent);
  recordSpan('task.input_wait', before.traceparent, taskAttributes(before), {
    startTime: before.updatedAt,
    links,
  });
}

/**
 * The exemplar labels of an observation made here: the trace and span ids of the active span when
 * it records (prom-client keeps the last one per bucket); none otherwise.
 */
export function traceExemplar(): Record<string, string> | undefined {
  const span = activeSpan();
  if (!span) return undefined;
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}

let on = false;

/** Whether `startTracing` turned tracing on: callers skip work only tracing needs (a Redis read). */
export function tracingOn(): boolean {
  return on;
}

/** Set by `startTracing` alone. */
export function markTracingOn(): void {
  on = true;
}

export interface SpanOptions {
  /** The parent; the active context when left out. */
  parent?: Context;
  attributes?: Attributes;
  kind?: SpanKind;
  /** Spans this one follows without being their child (`previousAttemptLink`, say). */
  links?: Link[];
}

/**
 * Runs `work` in a new span made active for it, and ends the span when `work` settles; a failure
 * is recorded as the span's error status (its code, no message: messages may quote input).
 */
export async function inSpan<T>(
  name: string,
  options: SpanOptions,
  work: (span: Span) => Promise<T>,
): Promise<T> {
  const parent = options.parent ?? context.active();
  const { attributes, kind, links } = options;
  const span = tracer().startSpan(name, { attributes, kind, links }, parent);
  try {
    return await context.with(trace.setSpan(parent, span), () => work(span));
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    span.setStatus({ code: SpanStatusCode.ERROR, message: typeof code === 'string' ? code : 'error' });
    throw err;
  } finally {
    span.end();
  }
}

/** The W3C trace context a caller sent (HTTP headers, or MCP's `_meta`). */
export interface IncomingTrace {
  traceparent?: string;
  tracestate?: string;
}

/**
 * The trace context in `traceparent`/`tracestate` fields of headers or an MCP `_meta` object; a
 * field that is not one string is ignored (W3C Trace Context: a malformed one starts a new trace).
 */
export function incomingTrace(carrier: Record<string, unknown> | undefined | null): IncomingTrace {
  const text = (v: unknown) => (typeof v === 'string' ? v : undefined);
  return { traceparent: text(carrier?.traceparent), tracestate: text(carrier?.tracestate) };
}

/**
 * Times one generation's prefill (start to first token) and decode (first token to end); `end`
 * records both as spans under the context active at the start, with the token counts known only
 * then (the usage of the result). Nothing is recorded when tracing is off.
 */
export function timeGeneration(): {
  firstToken(): void;
  end(usage: { input_tokens?: number; output_tokens?: number } | undefined): void;
} {
  const parent = context.active();
  const startedAt = Date.now();
  let firstAt: number | undefined;
  return {
    firstToken: () => void (firstAt ??= Date.now()),
    end: (usage) => {
      if (!on) return;
      const endAt = Date.now();
      const decodeFrom = firstAt ?? endAt;
      const attributes = { [ATTR.inputTokens]: usage?.input_tokens ?? 0 };
      tracer().startSpan('task.prefill', { startTime: startedAt, attributes }, parent).end(decodeFrom);
      const produced = { [ATTR.outputTokens]: usage?.output_tokens ?? 0 };
      tracer().startSpan('task.decode', { startTime: decodeFrom, attributes: produced }, parent).end(endAt);
    },
  };
}
