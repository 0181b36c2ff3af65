// Tracing's configuration from OTEL_* alone: off unless configured, bad values refused.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { context, trace } from '@opentelemetry/api';
import { createLogger } from '@taskline/log';
import { startTracing, tracingConfigured, TracingConfigError, tracingOn } from '../src/index.js';
import { samplerFromEnv } from '../src/sdk.js';

test('tracing is off unless an OTLP endpoint or exporter is configured, and OTEL_SDK_DISABLED wins', () => {
  assert.equal(tracingConfigured({}), false);
  assert.equal(tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }), true);
  assert.equal(tracingConfigured({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' }), true);
  assert.equal(tracingConfigured({ OTEL_TRACES_EXPORTER: 'otlp' }), true);
  assert.equal(
    tracingConfigured({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c' }),
    false,
  );
  assert.equal(tracingConfigured({ OTEL_SDK_DISABLED: 'true', OTEL_TRACES_EXPORTER: 'otlp' }), false);
  assert.throws(() => tracingConfigured({ OTEL_TRACES_EXPORTER: 'zipkin' }), TracingConfigError);
});

test('OTEL_TRACES_SAMPLER names the standard samplers; an unknown one or a bad ratio is refused', () => {
  assert.match(samplerFromEnv({}).toString(), /ParentBased.*AlwaysOn/);
  assert.match(samplerFromEnv({ OTEL_TRACES_SAMPLER: 'always_off' }).toString(), /AlwaysOff/);
  const ratio = samplerFromEnv({
    OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
    OTEL_TRACES_SAMPLER_ARG: '0.25',
  });
  assert.match(ratio.toString(), /ParentBased.*0\.25/);
  assert.throws(() => samplerFromEnv({ OTEL_TRACES_SAMPLER: 'jaeger_remote' }), TracingConfigError);
  assert.throws(
    () => samplerFromEnv({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '2' }),
    TracingConfigError,
  );
});

test('unconfigured, startTracing is a no-op; configured, log lines carry trace_id and span_id', async () => {
  const off = await startTracing('taskline-test', {});
  assert.equal(off.enabled, false);
  assert.equal(tracingOn(), false);
  // An endpoint nothing listens on: spans are made, their export fails quietly at shutdown.
  const on = await startTracing('taskline-test', {
    OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9',
    OTEL_BSP_SCHEDULE_DELAY: '60000',
  });
  assert.equal(on.enabled, true);
  assert.equal(tracingOn(), true);
  const lines: string[] = [];
  const log = createLogger({ service: 't' }, 'info', (line) => lines.push(line));
  const span = trace.getTracer('t').startSpan('work');
  context.with(trace.setSpan(context.active(), span), () => log.info('inside'));
  log.info('outside');
  span.end();
  const [inside, outside] = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.equal(inside!.trace_id, span.spanContext().traceId);
  assert.equal(inside!.span_id, span.spanContext().spanId);
  assert.equal(outside!.trace_id, undefined);
  await on.shutdown();
});
