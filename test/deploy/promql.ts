import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { createMetrics } from '@taskline/metrics';

export const ROOT = new URL('../../', import.meta.url).pathname;

const KEYWORDS = new Set([
  'and',
  'or',
  'unless',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'offset',
]);

/** Metric names a PromQL expression selects: identifiers outside strings, label matchers, ranges and grouping lists, not called as functions. */
export function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const m of stripped.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const after = stripped.slice((m.index ?? 0) + m[0].length).trimStart();
    if (after.startsWith('(') || KEYWORDS.has(m[0])) continue;
    names.add(m[0]);
  }
  return [...names];
}

export interface Rule {
  record?: string;
  alert?: string;
  expr: string;
  labels?: Record<string, string>;
}

export function loadRules(): Rule[] {
  const doc = parse(readFileSync(`${ROOT}deploy/prometheus/slo-rules.yaml`, 'utf8')) as {
    groups: { rules: Rule[] }[];
  };
  return doc.groups.flatMap((g) => g.rules);
}

/** Every series name a dashboard or rule may use: the metrics package's, histogram suffixes, recording rules, `up`. */
export async function knownSeries(): Promise<Set<string>> {
  const metrics = createMetrics({ service: 'test', tenantTopN: 1, tenantRebalanceMs: 0 });
  const known = new Set(['up']);
  for (const m of await metrics.registry.getMetricsAsJSON()) {
    known.add(m.name);
    // prom-client types `type` as a numeric enum; the JSON it returns carries the name ('histogram').
    if (String(m.type) === 'histogram') for (const s of ['_bucket', '_count', '_sum']) known.add(m.name + s);
  }
  for (const rule of loadRules()) if (rule.record) known.add(rule.record);
  metrics.close();
  return known;
}
