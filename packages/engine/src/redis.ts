// Connections to Redis or a Redis Cluster, from the environment's URL or seed nodes.
import { Cluster, Redis, type ClusterNode, type Command, type RedisOptions } from 'ioredis';
import { TasklineError } from './errors.js';
import { scriptLabel } from './scripts.js';
import { keySlot } from './slots.js';
import { redisUnavailableReason } from './unavailable.js';

/**
 * Where Taskline's Redis is: a URL (`redis://`, `rediss://` with TLS) for one Redis, or a Redis
 * Cluster, by seed nodes (`TASKLINE_REDIS_CLUSTER_NODES`) or by one seed as a URL
 * (`redis-cluster://[user:password@]host:port`, `rediss-cluster://` with TLS; the client learns
 * the other nodes from it).
 */
export type RedisTarget = string | ClusterTarget;

export interface ClusterTarget {
  nodes: { host: string; port: number }[];
  username?: string;
  password?: string;
  /** TLS to every node (managed clusters); `servername` is each node's host. */
  tls: boolean;
}

/** The target the validated environment names: the cluster's seed nodes when set, else `REDIS_URL`. */
export function redisTargetFromEnv(env: {
  REDIS_URL: string;
  TASKLINE_REDIS_CLUSTER_NODES: string;
  TASKLINE_REDIS_USERNAME: string;
  TASKLINE_REDIS_PASSWORD: string;
  TASKLINE_REDIS_TLS: boolean;
}): RedisTarget {
  if (!env.TASKLINE_REDIS_CLUSTER_NODES) return env.REDIS_URL;
  return {
    nodes: env.TASKLINE_REDIS_CLUSTER_NODES.split(',').map((hostPort) => {
      const at = hostPort.lastIndexOf(':');
      return { host: unbracket(hostPort.slice(0, at)), port: Number(hostPort.slice(at + 1)) };
    }),
    username: env.TASKLINE_REDIS_USERNAME || undefined,
    password: env.TASKLINE_REDIS_PASSWORD || undefined,
    tls: env.TASKLINE_REDIS_TLS,
  };
}

/** An IPv6 host without the brackets a URL or `host:port` gives it (RFC 3986 section 3.2.2): ioredis takes it bare. */
function unbracket(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

/** The cluster a target names, or null for one Redis. */
function clusterTarget(target: RedisTarget): ClusterTarget | null {
  if (typeof target !== 'string') return target;
  const url = new URL(target);
  if (url.protocol !== 'redis-cluster:' && url.protocol !== 'rediss-cluster:') return null;
  return {
    nodes: [{ host: unbracket(url.hostname), port: Number(url.port || 6379) }],
    username: decodeURIComponent(url.username) || undefined,
    password: decodeURIComponent(url.password) || undefined,
    tls: url.protocol === 'rediss-cluster:',
  };
}

/** A Redis Cluster connection (ioredis `Cluster`), which Taskline's code holds as a `Redis`. */
export function isCluster(redis: Redis): boolean {
  return (redis as unknown as { isCluster?: boolean }).isCluster === true;
}

/**
 * The connection that serves `key`: the one Redis, or the cluster primary that owns its slot now.
 * For what a cluster does not route by key: `SCAN` of one slot's keys, `WAIT` after its writes.
 */
export function nodeOf(redis: Redis, key: string): Redis {
  if (!isCluster(redis)) return redis;
  const cluster = redis as unknown as { slots: string[][]; nodes(role: 'master'): Redis[] };
  const owner = cluster.slots[keySlot(key)]?.[0];
  const node = cluster.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === owner);
  if (!node)
    // The slot table is not read yet, or its owner just failed over: a try-again (503), never a 500.
    throw new TasklineError('unavailable', `no primary known for ${key} yet; retry shortly`, {
      reason: 'clusterdown',
    });
  return node;
}

/**
 * Redis's clock (ms) on the node that holds `key`: the clock lease deadlines are stamped with
 * (`serverMs` in _emit.lua), so a sweep reading their index compares like with like.
 */
export async function serverTime(redis: Redis, key: string): Promise<number> {
  // A script routed by `key`, not TIME on nodeOf(key): a cluster client routes (and follows a
  // MOVED) before its slot table is read, where nodeOf would answer "try again".
  const [seconds, micros] = (await redis.eval(SERVER_TIME, 1, key)) as [number, number];
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}
const SERVER_TIME = "local t = redis.call('TIME') return { tonumber(t[1]), tonumber(t[2]) }";

/**
 * Whether Redis answers: a `PING`, on a cluster to every primary at once, resolving once any
 * answers. A keyless command goes to one node chosen at random, and one primary down (mid-failover)
 * is a third of the slots, not the cluster: a readiness probe that failed then would take every
 * api replica out of its load balancer at once.
 */
export async function redisAnswers(redis: Redis): Promise<boolean> {
  const nodes = isCluster(redis)
    ? (redis as unknown as { nodes(role: 'master'): Redis[] }).nodes('master')
    : [];
  const pings = (nodes.length > 0 ? nodes : [redis]).map((node) => node.ping());
  return Promise.any(pings).then(
    () => true,
    () => false,
  );
}

/** The same command interface: the rest of Taskline is written once for both (see `isCluster`). */
const asRedis = (cluster: Cluster) => cluster as unknown as Redis;

/**
 * The one connection factory of every service. Commands issued while Redis is down fail fast
 * instead of queueing without bound, so callers can answer 503 and clients retry. Commands issued
 * in the same tick go out as one write per node (auto-pipelining): with `appendfsync always`,
 * Redis then answers them after one fsync instead of one each, and a busy process makes one
 * syscall instead of dozens. On a cluster, commands go to the primary that owns their slot and
 * follow it through slot moves and failovers (MOVED, ASK, CLUSTERDOWN are retried), one write each.
 */
export function connectRedis(target: RedisTarget, name: string, extra: RedisOptions = {}): Redis {
  const options: RedisOptions = {
    connectionName: name,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: true,
    enableAutoPipelining: true,
    retryStrategy: (times) => Math.min(50 * times, 1000),
    ...extra,
  };
  const cluster = clusterTarget(target);
  if (!cluster) return new Redis(target as string, options);
  const { enableAutoPipelining: _batched, enableOfflineQueue, ...nodeOptions } = options;
  const connection = new Cluster(cluster.nodes as ClusterNode[], {
    // Not auto-pipelined: after a failover, a batch whose commands get MOVED replies naming
    // different slots fails every command in it, where a command sent alone is redirected.
    // Commands still go out without waiting for earlier replies, so round trips are the same;
    // what it costs is a write per command instead of one per batch.
    enableAutoPipelining: false,
    enableOfflineQueue,
    scaleReads: 'master',
    // The slot table read (CLUSTER SLOTS) gets more than the default second: on a busy host a
    // slow answer would otherwise fail the whole connection (ClusterAllFailedError).
    slotsRefreshTimeout: 5000,
    // ioredis re-reads the slot table on MOVED only. After failovers, a connection it opened in
    // READONLY mode to a node it took for a replica, and a table naming that node the primary, run
    // a script there whose writes are refused (READONLY) without a MOVED, for good: every claim of
    // a worker failed so after a Redis Cluster's restarts. Re-read every 2 s, the table heals.
    slotsRefreshInterval: 2000,
    clusterRetryStrategy: (times) => Math.min(100 * times, 1000),
    // A failover takes the cluster's node timeout and an election: commands wait for it
    // rather than fail at once (each retry re-reads the slot table).
    retryDelayOnFailover: 200,
    // Mid-failover the old and the new primary can answer MOVED to each other for a moment: a
    // pause between redirections outlasts it instead of spending the 16 at once.
    retryDelayOnMoved: 100,
    retryDelayOnClusterDown: 200,
    retryDelayOnTryAgain: 100,
    // Managed clusters announce nodes by name behind TLS: connect to the names as announced.
    ...(cluster.tls && { dnsLookup: (address, callback) => callback(null, address) }),
    redisOptions: {
      ...nodeOptions,
      username: cluster.username,
      password: cluster.password,
      ...(cluster.tls && { tls: {} }),
    },
  });
  return asRedis(options.maxRetriesPerRequest === null ? connection : failFastOnceReady(connection));
}

/**
 * Commands wait for the cluster's first connection; after it, a cluster that is down refuses them
 * at once (503, retried by clients) instead of queueing without bound, as `maxRetriesPerRequest`
 * does for one Redis. A failover is no outage of the cluster: commands for the failed primary's
 * slots wait for its replica (`retryDelayOnFailover`). BullMQ's blocking connections keep their
 * queue. A duplicate (a subscriber) starts over, waiting for its own first connection; it takes
 * options as `Redis#duplicate` does, which Taskline's callers pass.
 */
function failFastOnceReady(cluster: Cluster): Cluster {
  const duplicate = cluster.duplicate.bind(cluster);
  cluster.duplicate = (nodes?: unknown, override?: unknown) => {
    const options = (Array.isArray(nodes) ? override : nodes) as Record<string, unknown> | undefined;
    const { connectionName, ...rest } = options ?? {};
    return failFastOnceReady(
      duplicate(Array.isArray(nodes) ? nodes : [], {
        ...rest,
        enableOfflineQueue: true,
        redisOptions: {
          ...cluster.options.redisOptions,
          ...(typeof connectionName === 'string' && { connectionName }),
        },
      }),
    );
  };
  cluster.once('ready', () => (cluster.options.enableOfflineQueue = false));
  return cluster;
}

/**
 * A connection for BullMQ (one per queue or worker): BullMQ's blocking commands need
 * `maxRetriesPerRequest: null`, and it pipelines itself.
 */
export function connectQueueRedis(target: RedisTarget, name: string): Redis {
  return connectRedis(target, name, { maxRetriesPerRequest: null, enableAutoPipelining: false });
}

/** True for a failure that means "retry shortly" (see `redisUnavailableReason`): 503, not 500. */
export function isRedisUnavailable(err: unknown): boolean {
  return redisUnavailableReason(err) !== null;
}

/**
 * Times every command sent on `redis` (ioredis has no hook for it) from the send to its reply,
 * pipelined and MULTI commands included, each once even when ioredis resends it after a
 * reconnect. `command` is the lowercase command name, a Taskline script's `tl_<name>` for its
 * EVALSHA/EVAL: a bounded set. Failed commands are timed too; they are latency the caller saw.
 */
export function timeRedisCommands(redis: Redis, observe: (command: string, seconds: number) => void): void {
  const send = redis.sendCommand.bind(redis);
  const timed = new WeakSet<Command>();
  // Every argument passed on: a cluster's sendCommand takes a third, the node a retry goes to.
  const timedSend = (command: Command, ...rest: unknown[]) => {
    if (!timed.has(command)) {
      timed.add(command);
      const started = process.hrtime.bigint();
      const done = () => observe(commandLabel(command), Number(process.hrtime.bigint() - started) / 1e9);
      command.promise.then(done, done);
    }
    return (send as (command: Command, ...rest: unknown[]) => unknown)(command, ...rest);
  };
  redis.sendCommand = timedSend as Redis['sendCommand'];
}

function commandLabel(command: Command): string {
  if (command.name === 'evalsha' || command.name === 'eval')
    return scriptLabel(command.name, String(command.args[0])) ?? command.name;
  return command.name;
}
