/** `taskline` as a child process (its built `bin`), as a user runs it, and the stack CLI test files run it against. */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { fileURLToPath } from 'node:url';
import { KEY_A, LONG_INPUT, startClientStack, type Stack } from '@taskline/test-support/client-stack';

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

/** `run` of a long task (~10 s on the stack's slow steps), and the same under on_restart=retry. */
export const longArgs = [
  'run',
  '--max-output-tokens',
  String(LONG_INPUT.max_output_tokens),
  '--seed',
  String(LONG_INPUT.seed),
  '--temperature',
  String(LONG_INPUT.temperature),
  LONG_INPUT.input,
];
export const retryArgs = ['run', '--on-restart', 'retry', ...longArgs.slice(1)];

/**
 * A CLI test file's stack, started before its tests and stopped after: slow steps (a long task
 * lasts ~10 s, time for a second CLI process to cancel it) and a temporary folder for the CLI's
 * config and task database; `cli` and `finished` run the CLI against them as tenant A.
 */
export function useCliStack() {
  const ctx = {} as { stack: Stack; dir: string };
  before(async () => {
    ctx.dir = mkdtempSync(join(tmpdir(), 'taskline-cli-'));
    ctx.stack = await startClientStack('60');
  });
  after(() => ctx.stack.stop());
  const runner = cliRunner(() => ({
    XDG_CONFIG_HOME: ctx.dir,
    TASKLINE_URL: ctx.stack.base,
    TASKLINE_API_KEY: KEY_A,
    TASKLINE_STATE: join(ctx.dir, 'tasks.db'),
    REDIS_URL: ctx.stack.cluster.redis.url,
  }));
  return { ctx, ...runner };
}
