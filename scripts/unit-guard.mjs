// The unit tier's guard: `pnpm test:unit` preloads it into every test file, where any attempt to
// start a process (a redis-server, a service, a CLI) throws at once and names it, so a file that
// needs Redis or processes cannot sit in the unit tier unnoticed: it belongs to the integration tier.
// Plain JavaScript: worker threads (the model's) preload it too, where tsx does not load TypeScript.
import { createRequire, syncBuiltinESMExports } from 'node:module';
import process from 'node:process';

// The test runner itself spawns the files (its own execArgv has --test); only the files are guarded.
if (!process.execArgv.includes('--test')) {
  const childProcess = createRequire(import.meta.url)('node:child_process');
  for (const name of ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork']) {
    childProcess[name] = (command) => {
      throw new Error(
        `unit tier: ${name}(${String(command)}) starts a process; a test file that starts Redis or ` +
          'processes belongs to the integration tier (scripts/test-tiers.sh)',
      );
    };
  }
  // ES module imports of node:child_process read the patched functions too.
  syncBuiltinESMExports();
}
