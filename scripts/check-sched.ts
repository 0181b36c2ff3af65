// Fails (exit 1) when shipped code (`packages/*/src`, `services/*/src`) other than the scheduler
// index's owner, packages/engine/src/sched/, names a `{sched}` key, the layout `schedulerKeys`, or
// runs a script that writes the index: every new kind of work then goes through the owner's
// operations, whose invariants are stated once (sched/keys.ts). Tests and tools may inspect the
// index through `@taskline/engine/keys`. Run by `pnpm lint`.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const OWNER = 'packages/engine/src/sched/';
/** The engine's key-layout face for tests re-exports the layout (check-imports keeps `src/` off it). */
const FACE = 'packages/engine/src/keys.ts';
/** The script loader defines the scheduler's scripts; only the owner runs them. */
const LOADER = 'packages/engine/src/scripts.ts';
const SHIPPED = /^(packages|services)\/[^/]+\/src\/.*\.(ts|tsx|mts)$/;
const SCRIPT_CALL =
  /\bscripts\.(enqueue|lease_index|lease_unindex|claim_unindex|park_unindex|place_unindex)\s*\(|(?<!function )\bloadSchedulerScripts\b/;

/** What in one shipped file reaches the index, or null when nothing does. */
export function schedReach(path: string, text: string): string | null {
  if (path.startsWith(OWNER) || !SHIPPED.test(path) || path.endsWith('.d.ts')) return null;
  if (text.includes('{sched}')) return 'names a `{sched}` key';
  if (path !== FACE && /\bschedulerKeys\b/.test(text)) return 'uses `schedulerKeys`';
  if (path !== LOADER && SCRIPT_CALL.test(text)) return 'runs a script that writes the scheduler index';
  return null;
}

const SKIP = new Set(['node_modules', 'dist', '.git', '.data', '.bench', 'models', 'test']);

/** Every leak under `root`, as `<path>: <what>`. */
export function schedLeaks(root: string): string[] {
  const leaks: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      if (SKIP.has(name)) continue;
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else {
        const where = relative(root, path).split('\\').join('/');
        const found = SHIPPED.test(where) ? schedReach(where, readFileSync(path, 'utf8')) : null;
        if (found) leaks.push(`${where}: ${found}; use the operations of ${OWNER}`);
      }
    }
  };
  walk(root);
  return leaks;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const root = resolve(fileURLToPath(import.meta.url), '../..');
  const leaks = schedLeaks(root);
  for (const leak of leaks) console.error(leak);
  if (leaks.length > 0) process.exit(1);
  console.log(`check-sched: only ${OWNER} reaches the scheduler index`);
}
