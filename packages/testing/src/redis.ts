import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
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
  /** Start again on the same port from the same folder (and so the same AOF). */
  restart(): Promise<void>;
  /** Stop the server and remove its folder. */
  stop(): Promise<void>;
}

/**
 * A `redis-server` of the test's own. With `TASKLINE_TEST_REDIS=cluster` in the environment (what
 * `pnpm test:cluster` sets), a plain start gives a Redis Cluster instead (3 primaries, 3 replicas:
 * see `startRedisCluster`), named by a `redis-cluster://` URL that every Taskline connection
 * accepts; kill, restart, pause and resume then act on every node. Starts that ask for a folder,
 * a port or arguments (a replica, a restart from an AOF) stay one Redis.
 */
export async function startRedis(options: RedisServerOptions = {}): Promise<RedisServer> {
  const plain = options.dir === undefined && options.port === undefined && options.args === undefined;
  if (plain && process.env.TASKLINE_TEST_REDIS === 'cluster') return clusterAsServer(options);
  return startOne(options);
}

async function clusterAsServer(options: RedisServerOptions): Promise<RedisServer> {
  // Imported here: redis-cluster.ts builds on startRedis.
  const { startRedisCluster } = await import('./redis-cluster.js');
  const cluster = await startRedisCluster({ appendfsync: options.appendfsync });
  const seed = cluster.nodes[0]!;
  return {
    url: cluster.url,
    port: seed.port,
    dir: seed.dir,
    get pid() {
      return seed.pid;
    },
    pause: () => cluster.nodes.forEach((n) => n.pause()),
    resume: () => cluster.nodes.forEach((n) => n.resume()),
    async kill() {
      await Promise.all(cluster.nodes.map((n) => n.kill()));
    },
    async restart() {
      await Promise.all(cluster.nodes.map((n) => n.restart()));
      await cluster.healthy();
    },
    stop: () => cluster.stop(),
  };
}

async function startOne(options: RedisServerOptions): Promise<RedisServer> {
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
    async restart() {
      child = await launch(dir, port, appendfsync, args);
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
      '127.0.0.1',
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
      ...args,
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  child.unref();
  await waitForPort(port, child);
  return child;
}

async function waitForPort(port: number, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`);
    if (await ping(port)) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`redis-server did not answer on port ${port}`);
}

/** True once the server answers PING with PONG (it refuses commands while loading the AOF). */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ port, host: '127.0.0.1' });
    socket.once('error', () => resolve(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (data) => {
      socket.destroy();
      resolve(data.toString().startsWith('+PONG'));
    });
  });
}
