import { readdirSync, readFileSync } from 'node:fs';
import { stringify } from 'yaml';

/**
 * Renders the Taskline chart without the helm binary (not installable offline here). It
 * implements only the Go-template subset the chart uses and throws on anything else, so a
 * template that strays from the subset fails the tests instead of rendering wrongly:
 *   {{ .Values.a.b }}  {{ .Release.Name }}  {{ .Files.Get "path" }}
 *   pipes: quote, nindent N, toYaml (prefix form: toYaml X | nindent N)
 *   {{ if X }} / {{ if not X }} / {{ else }} / {{ end }}, with {{- -}} whitespace trimming.
 * `helm template` remains the reference wherever helm is available.
 */
export type Values = Record<string, unknown>;

interface Ctx {
  values: Values;
  release: { Name: string; Namespace: string };
  chartDir: string;
}

function lookup(ctx: Ctx, path: string): unknown {
  const parts = path.split('.').slice(1);
  let root: unknown;
  if (parts[0] === 'Values') root = ctx.values;
  else if (parts[0] === 'Release') root = ctx.release;
  else throw new Error(`unsupported reference ${path}`);
  for (const p of parts.slice(1)) root = (root as Record<string, unknown> | undefined)?.[p];
  return root;
}

function truthy(v: unknown): boolean {
  if (v === null || v === undefined || v === false || v === 0 || v === '') return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === 'object') return Object.keys(v).length > 0;
  return true;
}

function toYaml(v: unknown): string {
  return stringify(v).replace(/\n$/, '');
}

function evaluate(ctx: Ctx, expr: string): string {
  const [head = '', ...pipes] = expr.split('|').map((s) => s.trim());
  let value: unknown;
  let m: RegExpExecArray | null;
  if ((m = /^toYaml (\.\S+)$/.exec(head))) value = toYaml(lookup(ctx, m[1]!));
  else if ((m = /^\.Files\.Get "([^"]+)"$/.exec(head)))
    value = readFileSync(`${ctx.chartDir}/${m[1]}`, 'utf8').replace(/\n$/, '');
  else if (/^\.\S+$/.test(head)) value = lookup(ctx, head);
  else throw new Error(`unsupported template expression {{ ${expr} }}`);
  for (const pipe of pipes) {
    if (pipe === 'quote') value = JSON.stringify(value === undefined || value === null ? '' : String(value));
    else if ((m = /^nindent (\d+)$/.exec(pipe))) {
      const pad = ' '.repeat(Number(m[1]));
      value =
        '\n' +
        String(value)
          .split('\n')
          .map((l) => (l ? pad + l : l))
          .join('\n');
    } else throw new Error(`unsupported pipe ${pipe}`);
  }
  if (value === undefined || value === null) throw new Error(`{{ ${expr} }} has no value`);
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function condition(ctx: Ctx, expr: string): boolean {
  const m = /^(not )?(\.\S+)$/.exec(expr);
  if (!m) throw new Error(`unsupported condition ${expr}`);
  return truthy(lookup(ctx, m[2]!)) !== Boolean(m[1]);
}

export function renderTemplate(text: string, ctx: Ctx): string {
  const tokens = text.split(/(\{\{-?\s*[\s\S]*?\s*-?\}\})/);
  let out = '';
  // Each frame: is its branch live, and was the enclosing output live.
  const stack: { live: boolean; parentLive: boolean; taken: boolean }[] = [];
  const live = () => stack.every((f) => f.live);
  for (let i = 0; i < tokens.length; i++) {
    const tok = tokens[i]!;
    if (!tok.startsWith('{{')) {
      if (live()) out += tok;
      continue;
    }
    if (tok.startsWith('{{-')) out = live() || stack.length ? out.replace(/\s+$/, '') : out;
    if (tok.endsWith('-}}') && i + 1 < tokens.length) tokens[i + 1] = tokens[i + 1]!.replace(/^\s+/, '');
    const body = tok.replace(/^\{\{-?\s*/, '').replace(/\s*-?\}\}$/, '');
    if (body.startsWith('/*')) continue;
    let m: RegExpExecArray | null;
    if ((m = /^if (.+)$/.exec(body))) {
      const parentLive = live();
      const c = parentLive && condition(ctx, m[1]!);
      stack.push({ live: c, parentLive, taken: c });
    } else if (body === 'else') {
      const f = stack[stack.length - 1];
      if (!f) throw new Error('else without if');
      f.live = f.parentLive && !f.taken;
    } else if (body === 'end') {
      if (!stack.pop()) throw new Error('end without if');
    } else if (live()) out += evaluate(ctx, body);
  }
  if (stack.length) throw new Error('unclosed if');
  return out;
}

/** Renders every template of the chart with `values`, like `helm template <release> <chart>`. */
export function renderChart(chartDir: string, values: Values, release = 'taskline'): Record<string, string> {
  const ctx: Ctx = { values, release: { Name: release, Namespace: 'default' }, chartDir };
  const out: Record<string, string> = {};
  for (const file of readdirSync(`${chartDir}/templates`).filter((f) => f.endsWith('.yaml'))) {
    out[file] = renderTemplate(readFileSync(`${chartDir}/templates/${file}`, 'utf8'), ctx);
  }
  return out;
}

/** Helm's merge of user values over the chart's: maps merge, everything else replaces. */
export function mergeValues(base: unknown, over: unknown): unknown {
  if (over === undefined) return base;
  if (
    base &&
    over &&
    typeof base === 'object' &&
    typeof over === 'object' &&
    !Array.isArray(base) &&
    !Array.isArray(over)
  ) {
    const merged: Record<string, unknown> = { ...(base as Record<string, unknown>) };
    for (const [k, v] of Object.entries(over)) merged[k] = mergeValues(merged[k], v);
    return merged;
  }
  return over;
}
