// A test's Redis: one server, or a cluster under `TASKLINE_TEST_REDIS=cluster`; a replica of one.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { startRedisCluster } from './redis-cluster.js';
import { startRedisServer, type RedisServer, type RedisServerOptions } from './redis-server.js';
import { until } from './wait.js';

export type { RedisServer, RedisServerOptions } from './redis-server.js';

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
  return startRedisServer(options);
}

async function clusterAsServer(options: RedisServerOptions): Promise<RedisServer> {
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
    async restart(extra) {
      await Promise.all(cluster.nodes.map((n) => n.restart(extra)));
      await cluster.healthy();
    },
    stop: () => cluster.stop(),
  };
}

/**
 * A replica of `primary` (one Redis), once it is in sync and the primary counts it online: what a
 * write's `WAIT` then waits for. Stopped, paused and resumed on its own.
 */
export async function startReplica(primary: RedisServer): Promise<RedisServer> {
  const replica = await startRedisServer({ args: ['--replicaof', '127.0.0.1', String(primary.port)] });
  await until('the replica to be in sync', async () =>
    (await replicationOf(replica)).includes('master_link_status:up') &&
    /^slave\d+:.*state=online/m.test(await replicationOf(primary))
      ? true
      : undefined,
  );
  return replica;
}

const run = promisify(execFile);
const replicationOf = async (server: RedisServer) =>
  (await run('redis-cli', ['-p', String(server.port), 'INFO', 'replication'])).stdout;
