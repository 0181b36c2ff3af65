/** The chaos run's report: test/chaos/report/latest.json and latest.md, and the same markdown on stdout. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Invariant } from './invariants.js';
import { legacyCounts } from './legacy.js';
import {
  counts,
  faults,
  fiveXx,
  listeners,
  mcpInput,
  REPORT_DIR,
  SECONDS,
  sse,
  statusCounts,
  TERMINAL_BOUND_MS,
  totals,
  tracked,
} from './observed.js';
import type { OverloadResult } from './overload.js';
import * as tools from './tools.js';
import { workerToolStats } from './worker-tools.js';

export type Report = ReturnType<typeof buildReport>;

/** Everything the run counted, its invariants (each held or not) and the overload's result. */
export function buildReport(invariants: Invariant[], overloadResult: OverloadResult) {
  return {
    at: new Date().toISOString(),
    seconds: SECONDS,
    terminal_bound_ms: TERMINAL_BOUND_MS,
    requests: totals.requests,
    network_errors: totals.networkErrors,
    status_counts: statusCounts,
    five_xx: { ...fiveXx, violations: fiveXx.violations.length },
    load: {
      ...counts,
      tasks_tracked: tracked.size,
      sse,
      listeners: { ...listeners, violations: listeners.violations.length },
      mcp_input: mcpInput,
      mcp_2025: { ...legacyCounts, violations: legacyCounts.violations.length },
      tool_tasks: tools.toolStats(),
      worker_tool_tasks: workerToolStats(),
    },
    faults: {
      total: faults.length,
      by_target: faults.reduce<Record<string, number>>(
        (acc, f) => ((acc[`${f.target} ${f.action}`] = (acc[`${f.target} ${f.action}`] ?? 0) + 1), acc),
        {},
      ),
      timeline: faults,
    },
    invariants: invariants.map((i) => ({
      ...i,
      held: i.violations.length === 0,
      violations: i.violations.slice(0, 50),
      violation_count: i.violations.length,
    })),
    overload: overloadResult,
  };
}

/** Writes the report's files and prints it; true when a promise broke. */
export function writeReport(report: Report): boolean {
  mkdirSync(REPORT_DIR, { recursive: true });
  writeFileSync(join(REPORT_DIR, 'latest.json'), JSON.stringify(report, null, 2) + '\n');
  writeFileSync(join(REPORT_DIR, 'latest.md'), markdown(report));
  process.stdout.write(markdown(report));
  return report.invariants.some((i) => !i.held) || report.overload.violations.length > 0;
}

function markdown(r: Report): string {
  const lines = [
    `# Chaos run ${r.at}`,
    '',
    `${r.seconds} s of load; ${r.requests} requests (${r.network_errors} network errors); statuses ${JSON.stringify(r.status_counts)}.`,
    `5xx allowed (503 + Retry-After while Redis was down): ${r.five_xx.allowed_503_redis_down}; from HAProxy while an api replica was down: ${r.five_xx.load_balancer_during_api_kill}.`,
    '',
    `Faults injected: ${r.faults.total} — ${Object.entries(r.faults.by_target)
      .map(([k, v]) => `${k} ×${v}`)
      .join(', ')}.`,
    '',
    `Load: ${JSON.stringify(r.load)}`,
    '',
    '| Invariant | Checked | Held | Violations |',
    '| --- | ---: | :---: | ---: |',
    ...r.invariants.map(
      (i) => `| ${i.name} | ${i.checked} | ${i.held ? 'yes' : '**no**'} | ${i.violation_count} |`,
    ),
    '',
    ...r.invariants.flatMap((i) =>
      i.held ? [] : [`## ${i.name}`, '', ...i.violations.slice(0, 20).map((v) => `- ${v}`), ''],
    ),
    `## Overload`,
    '',
    `${r.overload.sent} creates from 48 concurrent clients: ${JSON.stringify(r.overload.answers)}; api RSS MiB before ${r.overload.rss_mib.before.join('/')}, peak ${r.overload.rss_mib.peak.join('/')}, after ${r.overload.rss_mib.after.join('/')}; accepted again ${r.overload.recovered_after_ms} ms after the load dropped.`,
    ...r.overload.violations.map((v) => `- **${v}**`),
    '',
  ];
  return lines.join('\n');
}
