// The OpenTelemetry SDK behind startTracing, loaded only once tracing is configured: its modules
// cost every service start about 135 ms of CPU, for nothing while tracing is off.
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
import { TracingConfigError, type Env, type Tracing } from './types.js';
import { markTracingOn, traceExemplar } from './spans.js';

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

/** The SDK's start for `startTracing`, tracing configured. @internal */
export function startSdk(serviceName: string, env: Env): Tracing {
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
