/** The benchmark report: JSON for machines, Markdown and an SVG chart for people. */

export interface Bar {
  id: string;
  name: string;
  /** What is compared, in words. */
  metric: string;
  value: number;
  /** `>=` bars want value at least `limit`; `<=` bars at most. */
  op: '>=' | '<=';
  limit: number;
  unit: string;
  pass: boolean;
  /** What this run measured as the reason, shown when the bar is missed. */
  cause?: string;
}

export function bar(
  id: string,
  name: string,
  metric: string,
  value: number,
  op: Bar['op'],
  limit: number,
  unit = '',
  cause?: string,
): Bar {
  const pass = Number.isFinite(value) && (op === '>=' ? value >= limit : value <= limit);
  return { id, name, metric, value, op, limit, unit, pass, ...(cause && { cause }) };
}

export interface Report {
  generatedAt: string;
  smoke: boolean;
  host: Record<string, unknown>;
  settings: Record<string, string>;
  bars: Bar[];
  results: Record<string, unknown>;
  notes: string[];
}

/** Throws naming what is wrong when a report is not what the Markdown and CI expect. */
export function validateReport(r: Report): void {
  const problems: string[] = [];
  if (Number.isNaN(Date.parse(r.generatedAt))) problems.push('generatedAt is not a date');
  if (!Array.isArray(r.bars) || r.bars.length === 0) problems.push('no bars');
  for (const b of r.bars ?? []) {
    if (!b.id || !b.name) problems.push('a bar without id or name');
    if (!Number.isFinite(b.value)) problems.push(`bar ${b.id}: value ${b.value} is not a number`);
    if (!Number.isFinite(b.limit)) problems.push(`bar ${b.id}: limit is not a number`);
    if (typeof b.pass !== 'boolean') problems.push(`bar ${b.id}: pass is not a boolean`);
    if (b.pass !== (b.op === '>=' ? b.value >= b.limit : b.value <= b.limit))
      problems.push(`bar ${b.id}: pass disagrees with value and limit`);
  }
  if (!r.results || typeof r.results !== 'object') problems.push('no results');
  if (problems.length) throw new Error(`malformed report: ${problems.join('; ')}`);
}

export const fmt = (n: number) =>
  Math.abs(n) >= 100 ? n.toFixed(0) : Math.abs(n) >= 10 ? n.toFixed(1) : n.toFixed(2);

export function toMarkdown(r: Report, tables: string[]): string {
  const lines = [
    `# Taskline benchmarks${r.smoke ? ' (smoke run: sizes too small to mean anything)' : ''}`,
    '',
    `Run ${r.generatedAt} on ${String(r.host.cpus)} CPUs (${String(r.host.cpuModel)}), Node ${String(r.host.node)}, Redis ${String(r.host.redis)} with AOF \`appendfsync always\`. Only ratios within this one run count.`,
    '',
    '| # | Bar | Measured | Required | Result |',
    '| --- | --- | --- | --- | --- |',
    ...r.bars.map(
      (b) =>
        `| ${b.id} | ${b.name}: ${b.metric} | ${fmt(b.value)}${b.unit} | ${b.op} ${fmt(b.limit)}${b.unit} | ${b.pass ? 'pass' : `**miss** (${missBy(b)})`} |`,
    ),
    '',
    ...r.bars.filter((b) => !b.pass && b.cause).map((b) => `- Missed ${b.id}, measured cause: ${b.cause}`),
    '',
    '![bars](latest.svg)',
    '',
    ...tables,
    '',
    '## Notes',
    '',
    ...r.notes.map((n) => `- ${n}`),
    '',
  ];
  return lines.join('\n');
}

function missBy(b: Bar): string {
  if (b.op === '>=') return `${fmt((b.value / b.limit) * 100)}% of the bar`;
  return `${fmt(b.value - b.limit)}${b.unit} over`;
}

/** One row per bar: how far the measurement is from the bar, on a log scale centred on 1 (the bar). */
export function toSvg(r: Report): string {
  const rowH = 26;
  const left = 330;
  const width = 760;
  const plotW = width - left - 90;
  const height = 40 + r.bars.length * rowH + 30;
  // Score >= 1 passes: value/limit for floors, limit/value for ceilings.
  const score = (b: Bar) => {
    const s = b.op === '>=' ? b.value / b.limit : b.limit / Math.max(b.value, 1e-9);
    return Math.min(Math.max(Number.isFinite(s) ? s : 0.01, 0.01), 100);
  };
  const x = (s: number) => left + ((Math.log10(s) + 2) / 4) * plotW;
  const rows = r.bars.map((b, i) => {
    const y = 40 + i * rowH;
    const s = score(b);
    const x0 = x(1);
    const x1 = x(s);
    const color = b.pass ? '#2e7d32' : '#c62828';
    return [
      `<text x="${left - 8}" y="${y + 15}" text-anchor="end" font-size="12">${escape(`${b.id}. ${b.name}`)}</text>`,
      `<rect x="${Math.min(x0, x1)}" y="${y + 4}" width="${Math.max(1, Math.abs(x1 - x0))}" height="${rowH - 10}" fill="${color}"/>`,
      `<text x="${Math.max(x0, x1) + 4}" y="${y + 15}" font-size="11">${escape(`${fmt(b.value)}${b.unit} (${b.op} ${fmt(b.limit)}${b.unit})`)}</text>`,
    ].join('');
  });
  const ticks = [0.01, 0.1, 1, 10, 100].map(
    (t) =>
      `<line x1="${x(t)}" x2="${x(t)}" y1="32" y2="${height - 24}" stroke="${t === 1 ? '#000' : '#ccc'}"/>` +
      `<text x="${x(t)}" y="${height - 10}" text-anchor="middle" font-size="10">${t === 1 ? 'bar' : `${t}x`}</text>`,
  );
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="10" y="20" font-size="14" font-weight="bold">Taskline vs the bar (right of the line passes; log scale)</text>`,
    ...ticks,
    ...rows,
    '</svg>',
    '',
  ].join('\n');
}

function escape(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
