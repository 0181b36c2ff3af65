import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { CHART, render } from './helm-tool.js';
import { ROOT } from './promql.js';

/**
 * "Durable before 202" holds only where Redis fsyncs before it replies: every Redis a shipped
 * deployment starts must run `appendfsync always`, the services' default TASKLINE_DURABILITY.
 */
const fsyncSettings = (text: string) => [...text.matchAll(/appendfsync['"\s,:-]+(\w+)/g)].map((m) => m[1]);

test('the compose stack runs Redis with appendfsync always and noeviction, and promises no less', () => {
  const compose = parse(readFileSync(`${ROOT}deploy/compose.yaml`, 'utf8')) as {
    'x-env'?: Record<string, string>;
    services: Record<string, { command?: string[]; environment?: Record<string, string> }>;
  };
  const command = compose.services.redis?.command?.join(' ') ?? '';
  assert.deepEqual(fsyncSettings(command), ['always'], command);
  assert.match(command, /--maxmemory-policy noeviction/);
  for (const [name, svc] of Object.entries(compose.services)) {
    const level = svc.environment?.TASKLINE_DURABILITY ?? compose['x-env']?.TASKLINE_DURABILITY;
    assert.ok(level === undefined || level === 'always', `${name} sets TASKLINE_DURABILITY=${level}`);
  }
});

test('the chart bundles Redis with appendfsync always by default and promises no less', () => {
  const values = parse(readFileSync(`${CHART}/values.yaml`, 'utf8')) as { redis: { durability: string } };
  assert.equal(values.redis.durability, 'always', 'values.yaml: redis.durability');
  const rendered = JSON.stringify(render());
  const settings = [...rendered.matchAll(/"--appendfsync","(\w+)"/g)].map((m) => m[1]);
  assert.deepEqual(settings, ['always'], 'the bundled Redis runs appendfsync always');
  const levels = [...rendered.matchAll(/"name":"TASKLINE_DURABILITY","value":"(\w+)"/g)].map((m) => m[1]);
  assert.ok(levels.length > 0, 'the services are told the durability level');
  assert.deepEqual([...new Set(levels)], ['always']);
});
