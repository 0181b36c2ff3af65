// `pnpm lint`: every dependency that more than one workspace package uses comes from the pnpm
// catalog (pnpm-workspace.yaml `catalog:`), so the workspace resolves one version of it.
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';

const SECTIONS = ['dependencies', 'devDependencies', 'optionalDependencies'] as const;
type Manifest = Partial<Record<(typeof SECTIONS)[number], Record<string, string>>>;

/** Every workspace package's manifest path, as pnpm lists them. */
function manifests(): string[] {
  const list = JSON.parse(
    execFileSync('pnpm', ['-r', 'ls', '--depth', '-1', '--json'], { encoding: 'utf8' }),
  ) as {
    path: string;
  }[];
  return list.map((p) => `${p.path}/package.json`);
}

/** `name -> [package.json: specifier]` for every dependency not from the workspace itself. */
function uses(files: string[]): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (const file of files) {
    const manifest = JSON.parse(readFileSync(file, 'utf8')) as Manifest;
    for (const section of SECTIONS)
      for (const [name, spec] of Object.entries(manifest[section] ?? {})) {
        if (spec.startsWith('workspace:')) continue;
        found.set(name, [...(found.get(name) ?? []), `${file}: ${spec}`]);
      }
  }
  return found;
}

const problems = [...uses(manifests())]
  .filter(([, where]) => where.length > 1 && where.some((w) => !w.endsWith(': catalog:')))
  .map(
    ([name, where]) =>
      `${name} is used by ${where.length} packages; name it catalog: in each\n  ${where.join('\n  ')}`,
  );
if (problems.length > 0) {
  process.stderr.write(`${problems.join('\n')}\n`);
  process.exit(1);
}
