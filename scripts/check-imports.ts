// Fails (exit 1) on any import circle in the workspace: between two files, or through the face of
// a workspace package (`@taskline/x` is its `exports` entry's source file). Type-only imports
// count too: a circle of types still ties the files together. Also fails when a package's or a
// service's own code (`src/`) imports `@taskline/engine/keys`: that key layout is for tests and
// tools that inspect Redis; services reach it through the engine's operations. Fails when a
// package's or service's file imports another one's by a relative path (`../../../services/...`):
// shared helpers are reached by package name. And fails when `@taskline/engine/core` (ids, states,
// errors for packages that need no engine) reaches a package outside Node's own, ioredis above
// all. Run by `pnpm lint`.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SKIP = new Set(['node_modules', 'dist', '.git', '.data', '.bench', 'models']);
const SOURCE = /\.(ts|tsx|mts)$/;

function walk(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name)) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path, out);
    else if (SOURCE.test(name) && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

const files = walk(root);

/** `@taskline/x[/sub]` -> the source file behind that entry of the package's `exports`. */
const faces = new Map<string, string>();
for (const dir of walkPackages(root)) {
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
    name: string;
    exports?: Record<string, string | { default?: string; import?: string }>;
  };
  for (const [entry, target] of Object.entries(pkg.exports ?? {})) {
    const built = typeof target === 'string' ? target : (target.default ?? target.import);
    if (typeof built !== 'string') continue;
    const source = join(dir, built.replace(/^\.\/dist\//, 'src/').replace(/\.js$/, '.ts'));
    if (existsSync(source)) faces.set(join(pkg.name, entry), source);
  }
}

function walkPackages(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name)) continue;
    const path = join(dir, name);
    if (!statSync(path).isDirectory()) continue;
    if (existsSync(join(path, 'package.json'))) out.push(path);
    walkPackages(path, out);
  }
  return out;
}

function resolveImport(from: string, spec: string): string | null {
  if (spec.startsWith('.')) {
    const base = resolve(dirname(from), spec);
    const stem = base.replace(/\.(m?js|tsx?)$/, '');
    for (const candidate of [`${stem}.ts`, `${stem}.tsx`, `${stem}.mts`, join(base, 'index.ts')])
      if (existsSync(candidate)) return candidate;
    return null;
  }
  return faces.get(spec) ?? null;
}

const INTERNAL = '@taskline/engine/keys';
const leaks: string[] = [];
/** `packages/x` or `services/x` of a path from the root; null elsewhere (test/, bench/, scripts/). */
const packageOf = (where: string) => /^(packages|services)\/[^/]+/.exec(where)?.[0] ?? null;
const reachedInto: string[] = [];
const graph = new Map<string, string[]>();
/** Each file's imports of packages (neither relative nor `node:`), for the light core's check. */
const packageImports = new Map<string, string[]>();
for (const file of files) {
  const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
  const targets = new Set<string>();
  for (const { fileName } of importedFiles) {
    const where = relative(root, file);
    if (fileName === INTERNAL && /^(packages|services)\/[^/]+\/src\//.test(where)) leaks.push(where);
    const target = resolveImport(file, fileName);
    if (target && target !== file) targets.add(target);
    // Another package's files are reached by its name (its `exports`), never by a relative path.
    const from = packageOf(where);
    const into = target ? packageOf(relative(root, target)) : null;
    if (from && into && into !== from && fileName.startsWith('.'))
      reachedInto.push(`${where}: imports ${fileName}; import it by package name`);
  }
  graph.set(file, [...targets]);
  packageImports.set(
    file,
    importedFiles.map((f) => f.fileName).filter((f) => !f.startsWith('.') && !f.startsWith('node:')),
  );
}

const LIGHT = '@taskline/engine/core';
/** Packages the light core's files reach, with the file that imports each. */
function heavyImports(face: string | undefined): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  const visitFile = (file: string): void => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const spec of packageImports.get(file) ?? []) out.push(`${relative(root, file)} imports ${spec}`);
    for (const next of graph.get(file) ?? []) visitFile(next);
  };
  if (face) visitFile(face);
  return out;
}
const heavy = heavyImports(faces.get(LIGHT));

// Tarjan's strongly connected components: every component of more than one file is a circle.
let index = 0;
const stack: string[] = [];
const state = new Map<string, { index: number; low: number; onStack: boolean }>();
const circles: string[][] = [];
function visit(v: string): void {
  const s = { index, low: index, onStack: true };
  index++;
  state.set(v, s);
  stack.push(v);
  for (const w of graph.get(v) ?? []) {
    const t = state.get(w);
    if (!t) {
      visit(w);
      s.low = Math.min(s.low, state.get(w)!.low);
    } else if (t.onStack) s.low = Math.min(s.low, t.index);
  }
  if (s.low !== s.index) return;
  const component: string[] = [];
  let w: string;
  do {
    w = stack.pop()!;
    state.get(w)!.onStack = false;
    component.push(w);
  } while (w !== v);
  if (component.length > 1) circles.push(component);
}
for (const file of graph.keys()) if (!state.has(file)) visit(file);

for (const component of circles) {
  console.error('import circle:');
  for (const file of component.sort()) console.error(`  ${relative(root, file)}`);
}
for (const file of leaks) console.error(`${file}: imports ${INTERNAL}; use the engine's operations`);
for (const line of heavy) console.error(`${LIGHT} must stay dependency-light: ${line}`);
for (const line of reachedInto) console.error(line);
if (circles.length > 0 || leaks.length > 0 || heavy.length > 0 || reachedInto.length > 0) process.exit(1);
console.log(
  `check-imports: no import circle among ${files.length} files, no service reaching into engine keys, no relative import across packages`,
);
