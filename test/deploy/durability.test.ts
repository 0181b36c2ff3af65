import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { renderChart, type Values } from './helm-render.js';
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

test('the chart bundles Redis with appendfsync always and promises no less', () => {
  const values = parse(readFileSync(`${ROOT}helm/taskline/values.yaml`, 'utf8')) as Values;
  const rendered = Object.values(renderChart(`${ROOT}helm/taskline`, values)).join('\n---\n');
  const settings = fsyncSettings(rendered);
  assert.ok(settings.length > 0, 'the bundled Redis sets appendfsync');
  assert.deepEqual(
    settings.filter((s) => s !== 'always'),
    [],
    'every appendfsync the chart renders by default is always',
  );
  const level = /TASKLINE_DURABILITY['":\s]+(\w+)/.exec(rendered)?.[1];
  assert.ok(level === undefined || level === 'always', `the chart sets TASKLINE_DURABILITY=${level}`);
});
