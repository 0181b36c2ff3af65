// Runs one pipeline step as a child process in its own process group, streams its output, and kills the whole group on abort.
import { spawn } from 'node:child_process';

export interface Step {
  name: string;
  command: string;
  args: string[];
  /** Folder the step runs in, relative to the workspace. */
  cwd: string;
}

export interface StepOptions {
  signal: AbortSignal;
  /** Each line the step writes (stdout and stderr alike). */
  onLine(line: string): void;
  /** How long the group gets between SIGTERM and SIGKILL. */
  killGraceMs: number;
}

export interface StepOutcome {
  /** The exit code; null when a signal ended it. */
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The last lines of its output, for the report of a failed step. */
  tail: string[];
}

const TAIL_LINES = 20;
/** How long after the SIGKILL a cancelled step waits for its group to be gone. */
const GONE_MARGIN_MS = 2000;

/**
 * Starts `step` in `workspace`. `detached: true` makes the child the leader of a new process
 * group, so its own children (npm starts a shell, which starts the test runner, which starts
 * workers) are in that group too and one signal to `-pid` reaches all of them: killing only the
 * direct child would leave its descendants running, holding the workspace and the CPU.
 */
export function runStep(step: Step, workspace: string, options: StepOptions): Promise<StepOutcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(step.command, step.args, {
      cwd: `${workspace}/${step.cwd}`,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      // No prompt may wait for a terminal nobody watches (git asking for credentials).
      env: { ...process.env, GIT_TERMINAL_PROMPT: '0', CI: 'true' },
    });
    const tail: string[] = [];
    const onLine = (line: string) => {
      tail.push(line);
      if (tail.length > TAIL_LINES) tail.shift();
      options.onLine(line);
    };
    splitLines(child.stdout, onLine);
    splitLines(child.stderr, onLine);
    const pid = child.pid;
    const stop = () => killGroup(pid, options.killGraceMs);
    if (options.signal.aborted) stop();
    else options.signal.addEventListener('abort', stop, { once: true });
    child.once('error', (err) => {
      options.signal.removeEventListener('abort', stop);
      reject(err);
    });
    // A step's leftovers die with it: nothing it started in the background may outlive the step
    // (and keep its output pipes open, so that 'close' never came).
    child.once('exit', () => {
      if (!options.signal.aborted && pid !== undefined) signalGroup(pid, 'SIGKILL');
    });
    child.once('close', (code, signal) => {
      options.signal.removeEventListener('abort', stop);
      const done = () => resolve({ code, signal, tail });
      if (options.signal.aborted && pid !== undefined)
        void groupGone(pid, options.killGraceMs + GONE_MARGIN_MS).then(done);
      else done();
    });
  });
}

/**
 * SIGTERM to the whole group, then SIGKILL to whatever of it is left after the grace (a process
 * that ignores SIGTERM, or one still shutting down). The SIGKILL goes to the group even once the
 * leader has exited: a grandchild may outlive it.
 */
function killGroup(pid: number | undefined, graceMs: number): void {
  if (pid === undefined) return;
  signalGroup(pid, 'SIGTERM');
  setTimeout(() => signalGroup(pid, 'SIGKILL'), graceMs).unref();
}

/** Resolves once no process of the group is left, or after `boundMs` (a zombie nobody reaps). */
async function groupGone(pid: number, boundMs: number): Promise<void> {
  const until = Date.now() + boundMs;
  while (groupAlive(pid) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: the group is already gone.
  }
}

function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

function splitLines(stream: NodeJS.ReadableStream, onLine: (line: string) => void): void {
  let pending = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    const lines = (pending + chunk).split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) onLine(line);
  });
  stream.on('end', () => {
    if (pending) onLine(pending);
  });
}
