import { readFileSync, writeFileSync } from 'node:fs';
import { CHART } from './helm-tool.js';

/**
 * The chart README's values table, generated from values.schema.json (every leaf value, its type,
 * its default from values.yaml is documented in values.yaml itself). `node --import tsx
 * test/deploy/chart-readme.ts --write` rewrites the table; helm.test.ts checks it is current.
 */
interface Schema {
  type?: string;
  enum?: unknown[];
  description?: string;
  properties?: Record<string, Schema>;
}

function rows(schema: Schema, path: string): string[] {
  if (
    schema.properties &&
    schema.type === 'object' &&
    path.split('.').length < 4 &&
    !/\.resources$/.test(path)
  )
    return Object.entries(schema.properties).flatMap(([k, s]) => rows(s, path ? `${path}.${k}` : k));
  const type = schema.enum
    ? schema.enum.map((e) => `\`${JSON.stringify(e)}\``).join(' \\| ')
    : (schema.type ?? 'object');
  return [`| \`${path}\` | ${type} | ${schema.description ?? ''} |`];
}

export function valuesTable(): string {
  const schema = JSON.parse(readFileSync(`${CHART}/values.schema.json`, 'utf8')) as Schema;
  return ['| Value | Type | What it does |', '| --- | --- | --- |', ...rows(schema, '')].join('\n');
}

const START = '<!-- values:start -->';
const END = '<!-- values:end -->';

/** The README with its table replaced by the generated one. */
export function readmeWithTable(readme: string): string {
  const [head, rest] = readme.split(START);
  const tail = rest?.split(END)[1];
  if (head === undefined || tail === undefined) throw new Error(`README lacks ${START} ... ${END}`);
  return `${head}${START}\n${valuesTable()}\n${END}${tail}`;
}

if (process.argv.includes('--write')) {
  const path = `${CHART}/README.md`;
  writeFileSync(path, readmeWithTable(readFileSync(path, 'utf8')));
}
