// Fails (exit 1) on a production function (the src/ of every package and service, generated code
// and the test harness packages aside) longer than 80 lines, unless ALLOWED names it with the reason
// it is a table, not logic.
// A function's length is its whole span, nested functions included: a router closure is as long as
// the handlers written inside it. Run by `pnpm lint`; `--all` lists every one, allowed or not.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const LIMIT = 80;
const SKIP = new Set(['node_modules', 'dist', 'generated']);
/** Only tests import these: they are the harness, not production code. */
const HARNESS = new Set(['packages/testing', 'packages/test-support']);
const SOURCE = /\.(ts|tsx|mts)$/;

/** `path:name` -> why that function may be long: it lists data, one entry a line, and holds no logic. */
const ALLOWED = new Map<string, string>([
  ['packages/metrics/src/metrics.ts:defineMetrics', 'every metric, one constructor each: a catalogue'],
  ['packages/console/src/openapi.ts:adminOpenApi', 'the OpenAPI document of /admin/v1, as data'],
  ['services/api/src/lmsp/openapi.ts:buildOpenApi', 'the paths of the LMSP OpenAPI document, as data'],
  ['services/api/src/lmsp/openapi-parts.ts:components', 'the LMSP OpenAPI components, as data'],
  [
    'services/api/src/lmsp/openapi-webhooks.ts:webhookPaths',
    'the webhook paths of the LMSP OpenAPI document, as data',
  ],
]);

interface LongFunction {
  where: string;
  name: string;
  line: number;
  lines: number;
}

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name)) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sourceFiles(path, out);
    else if (SOURCE.test(name) && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

function productionDirs(): string[] {
  const dirs: string[] = [];
  for (const group of ['packages', 'services'])
    for (const name of readdirSync(join(root, group))) {
      const src = join(root, group, name, 'src');
      if (HARNESS.has(`${group}/${name}`)) continue;
      if (statSync(join(root, group, name)).isDirectory() && existsSync(src)) dirs.push(src);
    }
  return dirs;
}

/** The name a reader would search for: the declaration's, or the variable, property or call it sits in. */
function nameOf(node: ts.FunctionLikeDeclaration, file: ts.SourceFile): string {
  if (node.name) return node.name.getText(file);
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) return parent.name.getText(file);
  if (ts.isPropertyDeclaration(parent)) return parent.name.getText(file);
  if (ts.isCallExpression(parent)) return `${parent.expression.getText(file).slice(0, 40)}(...)`;
  return '(anonymous)';
}

function longFunctionsIn(path: string): LongFunction[] {
  const text = readFileSync(path, 'utf8');
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found: LongFunction[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const fn = node as ts.FunctionLikeDeclaration;
      const first = file.getLineAndCharacterOfPosition(fn.getStart(file)).line;
      const last = file.getLineAndCharacterOfPosition(fn.getEnd()).line;
      const lines = last - first + 1;
      if (lines > LIMIT)
        found.push({ where: relative(root, path), name: nameOf(fn, file), line: first + 1, lines });
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

function longFunctions(): LongFunction[] {
  return productionDirs().flatMap((dir) => sourceFiles(dir).flatMap(longFunctionsIn));
}

function main(): void {
  const all = process.argv.includes('--all');
  const found = longFunctions();
  const key = (f: LongFunction) => `${f.where}:${f.name}`;
  const excused = (f: LongFunction) => ALLOWED.get(key(f));
  const refused = found.filter((f) => excused(f) === undefined);
  for (const f of all ? found : refused) {
    const why = excused(f);
    console.error(`${f.where}:${f.line} ${f.name} is ${f.lines} lines${why ? ` (${why})` : ''}`);
  }
  const seen = new Set(found.map(key));
  const stale = [...ALLOWED.keys()].filter((k) => !seen.has(k));
  for (const k of stale) console.error(`${k} is listed as long but is not: drop its entry`);
  if (refused.length > 0 || stale.length > 0) {
    console.error(`check-function-length: split each function over ${LIMIT} lines into named ones`);
    process.exit(1);
  }
  console.log(`check-function-length: no production function over ${LIMIT} lines but ${ALLOWED.size} tables`);
}

main();
