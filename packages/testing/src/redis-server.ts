// One `redis-server` of the test's own: AOF, a temporary folder, a free port.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.js';

export interface RedisServerOptions {
  /** `always` (Taskline's default) or `everysec`. */
  appendfsync?: 'always' | 'everysec';
  /** Reuse a data folder, e.g. to restart from an AOF left by a killed server. */
  dir?: string;
  port?: number;
  /** More `redis-server` arguments, e.g. `['--replicaof', '127.0.0.1', '6380']` for a replica. */
  args?: string[];
}

/** A `redis-server` of the test's own: AOF on, in a temporary folder, on a free port, stopped by PID. */
export interface RedisServer {
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  readonly pid: number;
  /** SIGSTOP / SIGCONT: a server that hangs (a stalled replica) without closing its connections. */
  pause(): void;
  resume(): void;
  /** SIGKILL: no shutdown save, the AOF is all that survives. */
  kill(): Promise<void>;
  /**
   * Start again on the same port from the same folder (and so the same AOF), with `extra`
   * arguments for this start only (e.g. `--key-load-delay`, to make the load take a while).
   */
  restart(extra?: string[]): Promise<void>;
  /** Stop the server and remove its folder. */
  stop(): Promise<void>;
}

/** One `redis-server` of the test's own: AOF on, in a temporary folder, on a free port, stopped by PID. */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const dir = options.dir ?? (await mkdtemp(join(tmpdir(), 'taskline-redis-')));
  const port = options.port ?? (await freePort());
  const appendfsync = options.appendfsync ?? 'always';
  const args = options.args ?? [];
  let child: ChildProcess = await launch(dir, port, appendfsync, args);

  // The child is unref'd so a forgotten server never holds a test run open; while we wait for its
  // exit, it must hold the event loop, or Node exits with the wait still pending.
  const waitExit = (c: ChildProcess) =>
    new Promise<void>((resolve) => {
      if (c.exitCode !== null || c.signalCode) return resolve();
      c.ref();
      c.once('exit', () => resolve());
    });

  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    dir,
    get pid() {
      return child.pid ?? -1;
    },
    pause() {
      child.kill('SIGSTOP');
    },
    resume() {
      child.kill('SIGCONT');
    },
    async kill() {
      child.kill('SIGKILL');
      await waitExit(child);
    },
    async restart(extra = []) {
      child = await launch(dir, port, appendfsync, [...args, ...extra]);
    },
    async stop() {
      child.kill('SIGKILL');
      await waitExit(child);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function launch(dir: string, port: number, appendfsync: string, args: string[]): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      // IPv6 loopback too where the host has it (`-`: optional), for clients given an IPv6 literal.
      '127.0.0.1 -::1',
      '--dir',
      dir,
      '--appendonly',
      'yes',
      '--appendfsync',
      appendfsync,
      '--save',
      '',
      '--daemonize',
      'no',
      '--loglevel',
      'warning',
      // Its own words on why it stopped (a port taken, a file it cannot read) go into the error.
      '--logfile',
      join(dir, LOG),
      ...args,
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  child.unref();
  await waitForPort(port, child, dir);
  return child;
}

const LOG = 'redis-server.log';

/**
 * How long a start may take to answer with its data loaded: a hang bound, not a speed check. A
 * test's large AOF loaded by a server at the lowest CPU priority on a busy host took over 10 s.
 */
const START_BOUND_MS = 60_000;

async function waitForPort(port: number, child: ChildProcess, dir: string): Promise<void> {
  const deadline = Date.now() + START_BOUND_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      const log = await readFile(join(dir, LOG), 'utf8').catch(() => '');
      const last = log.trim().split('\n').slice(-3).join(' | ');
      throw new Error(
        `redis-server on port ${port} exited with ${child.exitCode ?? child.signalCode}${last && `: ${last}`}`,
      );
    }
    if (await answers(port, child.pid!)) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  child.kill('SIGKILL');
  throw new Error(`redis-server did not answer on port ${port} within ${START_BOUND_MS / 1000} s`);
}

/**
 * True once the server on `port` is the process `pid` and done loading its AOF. The port, free
 * when picked, may since have gone to another program: it must neither pass for our server nor
 * hang the wait by never answering.
 */
function answers(port: number, pid: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ port, host: '127.0.0.1' });
    let reply = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('INFO server persistence\r\n'));
    socket.on('data', (data) => {
      reply += data.toString('latin1');
      if (!reply.startsWith('$')) return done(false);
      const id = /\r\nprocess_id:(\d+)\r\n/.exec(reply);
      const loading = /\r\nloading:(\d)\r\n/.exec(reply);
      if (id && loading) done(Number(id[1]) === pid && loading[1] === '0');
    });
  });
}
