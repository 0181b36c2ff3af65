/** `taskline` as a child process (its built `bin`), as a user runs it. */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const BIN = fileURLToPath(new URL('../bin/taskline.js', import.meta.url));
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

export interface Cli {
  child: ChildProcess;
  stdout: string;
  stderr: string;
  done: Promise<number | null>;
}

/** Runners of the CLI with `base()`'s environment (read at each run), `env` on top. */
export function cliRunner(base: () => Record<string, string>) {
  function cli(args: string[], env: Record<string, string> = {}): Cli {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, ...base(), ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const out: Cli = { child, stdout: '', stderr: '', done: Promise.resolve(null) };
    child.stdout!.on('data', (d) => (out.stdout += d));
    child.stderr!.on('data', (d) => (out.stderr += d));
    child.stdin!.end();
    out.done = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
    return out;
  }
  async function finished(args: string[], env: Record<string, string> = {}) {
    const c = cli(args, env);
    const code = await c.done;
    return { code, stdout: c.stdout, stderr: c.stderr };
  }
  return { cli, finished };
}
