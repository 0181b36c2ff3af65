/**
 * The median of several full runs, bar by bar, with the spread: what the README quotes.
 *   node --import tsx bench/src/summary.ts run1/latest.json run2/latest.json run3/latest.json
 */
import { readFile } from 'node:fs/promises';
import { bar, fmt, type Report } from './report.js';

const reports = await Promise.all(
  process.argv.slice(2).map(async (f) => JSON.parse(await readFile(f, 'utf8')) as Report),
);
if (reports.length === 0) throw new Error('usage: summary.ts <latest.json> ...');
const lines = [
  `Median of ${reports.length} full runs (${reports.map((r) => r.generatedAt.slice(0, 16)).join(', ')}), with the lowest and highest:`,
  '',
  '| # | Bar | Median | Spread | Required | Result (median) |',
  '| --- | --- | --- | --- | --- | --- |',
];
for (const first of reports[0]!.bars) {
  const values = reports
    .map((r) => r.bars.find((b) => b.id === first.id)?.value)
    .filter((v): v is number => v !== undefined)
    .sort((a, b) => a - b);
  const mid =
    values.length % 2
      ? values[(values.length - 1) / 2]!
      : (values[values.length / 2 - 1]! + values[values.length / 2]!) / 2;
  const m = bar(first.id, first.name, first.metric, mid, first.op, first.limit, first.unit);
  const u = first.unit;
  lines.push(
    `| ${m.id} | ${m.name}: ${m.metric} | ${fmt(mid)}${u} | ${fmt(values[0]!)}-${fmt(values.at(-1)!)}${u} | ${m.op} ${fmt(m.limit)}${u} | ${m.pass ? 'pass' : 'miss'} |`,
  );
}
process.stdout.write(lines.join('\n') + '\n');
