// A service with tracing off loads no OpenTelemetry SDK module: they cost each start about 135 ms
// of CPU. Configured, the same start loads them.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { LOADED_MODULES_PRELOAD, startServices } from '@taskline/testing';

const SDK = /\/@opentelemetry\/(sdk-trace|exporter-trace-otlp-http|resources)\//;

async function modulesOfSchedulerStart(env: Record<string, string>): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), 'taskline-loaded-'));
  const loaded = join(dir, 'loaded.txt');
  writeFileSync(loaded, '');
  try {
    const stack = await startServices({
      env: { NODE_OPTIONS: `--import ${LOADED_MODULES_PRELOAD}`, TASKLINE_LOADED: loaded, ...env },
    });
    await stack.stop();
    return readFileSync(loaded, 'utf8').split('\n');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('a scheduler with tracing off loads no OpenTelemetry SDK module; with an endpoint it does', async () => {
  const off = await modulesOfSchedulerStart({});
  assert.ok(
    off.some((u) => u.includes('/packages/tracing/dist/')),
    'the hook saw @taskline/tracing load',
  );
  assert.deepEqual(
    off.filter((u) => SDK.test(u)),
    [],
  );
  const on = await modulesOfSchedulerStart({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' });
  assert.ok(
    on.some((u) => SDK.test(u)),
    'configured, the SDK loads',
  );
});
