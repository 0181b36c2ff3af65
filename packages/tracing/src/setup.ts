// Starting OpenTelemetry tracing in a service from the standard OTEL_* environment variables.

import { TracingConfigError, type Env, type Tracing } from './types.js';

const OFF: Tracing = { enabled: false, shutdown: async () => undefined };

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

/**
 * Starts tracing for one service (`taskline-api`, `taskline-scheduler`, `taskline-worker`) when the
 * OTEL_* variables configure it; a no-op otherwise. The resource is the service name, then
 * OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME over it; spans leave in batches (OTEL_BSP_*) as
 * OTLP/HTTP JSON to the endpoint the exporter reads from OTEL_EXPORTER_OTLP_*. The SDK is loaded
 * only then; a bad OTEL_* value rejects with TracingConfigError.
 */
export async function startTracing(serviceName: string, env: Env = process.env): Promise<Tracing> {
  if (!tracingConfigured(env)) return OFF;
  const { startSdk } = await import('./sdk.js');
  return startSdk(serviceName, env);
}
