// Starting OpenTelemetry tracing in a service from the standard OTEL_* environment variables.
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
} from '@opentelemetry/sdk-trace';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import { markTracingOn, traceExemplar } from './spans.js';

type Env = Record<string, string | undefined>;

/** What `startTracing` started: `shutdown` flushes the spans still waiting (call it on exit). */
export interface Tracing {
  enabled: boolean;
  /**
   * Where latency histograms take trace-id exemplars from (createMetrics' `exemplars`); undefined
   * when tracing is off, so that the histograms stay as they are without it.
   */
  exemplar?: () => Record<string, string> | undefined;
  shutdown(): Promise<void>;
}

const OFF: Tracing = { enabled: false, shutdown: async () => undefined };

/** A bad OTEL_* value: services refuse to start with it, as with any other bad setting. */
export class TracingConfigError extends Error {
  readonly code = 'invalid_config';
}

/**
 * Tracing is on when an OTLP endpoint is named (OTEL_EXPORTER_OTLP_ENDPOINT or
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or OTEL_TRACES_EXPORTER is `otlp`; OTEL_SDK_DISABLED=true
 * and OTEL_TRACES_EXPORTER=none turn it off. Off, the @opentelemetry/api no-op tracer stays.
 */
export function tracingConfigured(env: Env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false;
  const exporter = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase();
  if (exporter === 'none') return false;
  if (exporter !== undefined && exporter !== '' && exporter !== 'otlp')
    throw new TracingConfigError(`OTEL_TRACES_EXPORTER=${exporter}: only otlp (or none) is supported`);
  if (exporter === 'otlp') return true;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

/** OTEL_TRACES_SAMPLER and its argument, as the OpenTelemetry SDK environment variables define them. */
export function samplerFromEnv(env: Env): Sampler {
  const name = (env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on').trim().toLowerCase();
  const ratio = () => {
    const arg = Number(env.OTEL_TRACES_SAMPLER_ARG ?? '1');
    if (!(arg >= 0 && arg <= 1))
      throw new TracingConfigError(
        `OTEL_TRACES_SAMPLER_ARG=${env.OTEL_TRACES_SAMPLER_ARG}: a ratio in [0, 1]`,
      );
    return new TraceIdRatioBasedSampler(arg);
  };
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio();
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio() });
    default:
      throw new TracingConfigError(`OTEL_TRACES_SAMPLER=${name} is not supported`);
  }
}

function bspNumber(env: Env, name: string): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n <= 0) throw new TracingConfigError(`${name}=${raw}: a positive integer`);
  return n;
}

/**
 * Starts tracing for one service (`taskline-api`, `taskline-scheduler`, `taskline-worker`) when the
 * OTEL_* variables configure it; a no-op otherwise. The resource is the service name, then
 * OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME over it; spans leave in batches (OTEL_BSP_*) as
 * OTLP/HTTP JSON to the endpoint the exporter reads from OTEL_EXPORTER_OTLP_*.
 */
export function startTracing(serviceName: string, env: Env = process.env): Tracing {
  if (!tracingConfigured(env)) return OFF;
  const resource = resourceFromAttributes({ [ATTR_SERVICE_NAME]: serviceName }).merge(
    detectResources({ detectors: [envDetector] }),
  );
  const processor = new BatchSpanProcessor({
    exporter: new OTLPTraceExporter(),
    scheduledDelayMillis: bspNumber(env, 'OTEL_BSP_SCHEDULE_DELAY'),
    maxQueueSize: bspNumber(env, 'OTEL_BSP_MAX_QUEUE_SIZE'),
    maxExportBatchSize: bspNumber(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE'),
    exportTimeoutMillis: bspNumber(env, 'OTEL_BSP_EXPORT_TIMEOUT'),
  });
  const provider = new TracerProvider({
    resource,
    sampler: samplerFromEnv(env),
    spanProcessors: [processor],
  });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  markTracingOn();
  return {
    enabled: true,
    exemplar: traceExemplar,
    shutdown: () => provider.shutdown().catch(() => undefined),
  };
}
