import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { createWriteStream, type WriteStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { freePort } from '@taskline/testing';

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/**
 * One service process started from its source with tsx, as the other service tests do, so that
 * the test holds its PID and can SIGKILL and restart it. Its JSON log lines go to `logFile`.
 */
export class Service {
  child: ChildProcess | null = null;
  /** Resolves once the current process reports it is up (a log line for which `ready` is true). */
  up: Promise<void> = Promise.resolve();
  starts = 0;
  kills = 0;
  private readonly log: WriteStream;

  constructor(
    readonly name: string,
    readonly entry: string,
    readonly env: Record<string, string>,
    logFile: string,
    private readonly ready: (entry: Record<string, unknown>) => boolean,
  ) {
    this.log = createWriteStream(logFile, { flags: 'a' });
  }

  start(): Promise<void> {
    const child = spawn(process.execPath, ['--import', 'tsx', this.entry], {
      cwd: ROOT,
      env: { ...process.env, ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    this.starts++;
    child.stderr!.on('data', (d: Buffer) => this.log.write(d));
    this.up = new Promise<void>((resolve, reject) => {
      createInterface({ input: child.stdout! }).on('line', (line) => {
        this.log.write(line + '\n');
        try {
          if (this.ready(JSON.parse(line) as Record<string, unknown>)) resolve();
        } catch {
          // not a JSON log line
        }
      });
      child.once('exit', (code, signal) =>
        reject(new Error(`${this.name} exited (${code ?? signal}) before ready`)),
      );
      // Generous: six services compiling their sources at once on a loaded CI machine take a while.
      setTimeout(() => reject(new Error(`${this.name} not ready after 120 s`)), 120_000).unref();
    });
    this.up.catch(() => undefined);
    return this.up;
  }

  /** SIGKILL: no shutdown hook runs, exactly like a crash. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    this.kills++;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  }

  async stop(): Promise<void> {
    await this.kill();
    this.log.end();
  }
}

/** An api process (services/api/src/main.ts, LMSP and MCP) on a free port. */
export async function apiService(
  name: string,
  env: Record<string, string>,
  logFile: string,
  port?: number,
): Promise<Service & { port: number; base: string }> {
  const p = port ?? (await freePort());
  const service = new Service(
    name,
    'services/api/src/main.ts',
    // Readiness is the `listening` line, an info log: the level stays at info.
    { TASKLINE_HOST: '127.0.0.1', ...env, TASKLINE_LOG_LEVEL: 'info', TASKLINE_PORT: String(p) },
    logFile,
    (e) => e.msg === 'listening',
  );
  return Object.assign(service, { port: p, base: `http://127.0.0.1:${p}` });
}

/** A running HAProxy of the local cluster's shape, and its address. */
export interface LoadBalancer {
  child: ChildProcess;
  port: number;
  /** `http://127.0.0.1:<port>` */
  lb: string;
}

/**
 * HAProxy as `scripts/cluster.sh` runs it (deploy/haproxy/haproxy.cfg, or `config`, a path from the
 * repository root or absolute) in front of two api replicas on a free port; resolves once
 * `/healthz` answers through it.
 */
export async function startHaproxy(
  apiPorts: readonly [number, number],
  options: { config?: string } = {},
): Promise<LoadBalancer> {
  const port = await freePort();
  const child = spawn('haproxy', ['-W', '-db', '-f', options.config ?? 'deploy/haproxy/haproxy.cfg'], {
    cwd: ROOT,
    env: {
      ...process.env,
      TASKLINE_LB_HOST: '127.0.0.1',
      TASKLINE_LB_PORT: String(port),
      TASKLINE_API1_PORT: String(apiPorts[0]),
      TASKLINE_API2_PORT: String(apiPorts[1]),
    },
    stdio: ['ignore', 'ignore', 'ignore'],
  });
  // A missing binary is an 'error' event, which would otherwise end the run with its processes left running.
  let failed: Error | null = null;
  child.once('error', (err) => (failed = err));
  const lb = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const status = await fetch(`${lb}/healthz`).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) break;
    if (failed) throw new Error(`HAProxy did not start (${String(failed)}); \`pnpm setup\` installs it`);
    if (i > 100 || child.exitCode !== null) {
      child.kill('SIGKILL');
      throw new Error(`HAProxy did not come up on ${lb}`);
    }
    await sleep(100);
  }
  return { child, port, lb };
}
