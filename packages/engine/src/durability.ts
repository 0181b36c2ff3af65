// What an acknowledged write survives (`TASKLINE_DURABILITY`), and the Redis settings checked for it.
import type { Redis, RedisOptions } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { TasklineError } from './errors.js';
import { connectRedis, isCluster, nodeOf, redisTargetFromEnv, type RedisTarget } from './redis.js';
import { redisUnavailableReason } from './unavailable.js';

/**
 * What an acknowledged write survives (`TASKLINE_DURABILITY`). `always`: it is on disk before Redis
 * replies (`appendfsync always`), so nothing acknowledged is lost even on a power loss. `everysec`:
 * Redis fsyncs about once a second, so a power loss or kernel crash can lose about the last second
 * of acknowledged writes (two when the disk stalls); a crash of the Redis process alone loses
 * nothing, the kernel still holds the data.
 */
export type DurabilityLevel = 'always' | 'everysec';

/** What a crash can lose at each level, in the words `/lmsp/v1/capabilities` and the logs use. */
export const DURABILITY_LOSS: Record<DurabilityLevel, string> = {
  always: 'none: every acknowledged write is on disk (and on every connected replica) first',
  everysec:
    'up to about one second (two if the disk stalls) of acknowledged writes on a power loss or kernel crash of the Redis host',
};

/** `appendfsync` values that keep each level's promise (a stronger one keeps it too). */
const KEEPS: Record<DurabilityLevel, readonly string[]> = {
  always: ['always'],
  everysec: ['always', 'everysec'],
};

export interface DurabilityCheck {
  level: DurabilityLevel;
  /** `TASKLINE_REQUIRE_AOF`: false only for benchmarks, where a lost task costs nothing. */
  requireAof: boolean;
}

/** What the check found (a type, not an interface, so it logs as plain fields). */
export type DurabilityReport = {
  durability: DurabilityLevel;
  aofEnabled: boolean;
  /** Null where CONFIG is not allowed (managed Redis): the operator's setting is trusted. */
  appendfsync: string | null;
  maxmemoryPolicy: string | null;
  /** On a Redis Cluster: how many nodes were checked (all of them, replicas included). */
  nodes?: number;
};

/** The check's settings from the validated environment (`@taskline/config`), the same in every service. */
export function durabilityFromEnv(env: {
  TASKLINE_DURABILITY: DurabilityLevel;
  TASKLINE_REQUIRE_AOF: boolean;
}): DurabilityCheck {
  return { level: env.TASKLINE_DURABILITY, requireAof: env.TASKLINE_REQUIRE_AOF };
}

interface Warn {
  warn(msg: string, fields?: Record<string, unknown>): void;
}

/**
 * A service's Redis at start: connected as `name`, its connection errors logged as JSON (unheard,
 * ioredis prints each one's stack), and the start-up check passed (`checkDurability`): every
 * service refuses a Redis that would lose what it acknowledges. The target is for the connections
 * a service opens later (BullMQ's, a worker's control plane).
 */
export async function openServiceRedis(
  env: Parameters<typeof redisTargetFromEnv>[0] & Parameters<typeof durabilityFromEnv>[0],
  name: string,
  log: Warn & { info(msg: string, fields?: Record<string, unknown>): void },
  extra: RedisOptions = {},
): Promise<{ target: RedisTarget; redis: Redis }> {
  const target = redisTargetFromEnv(env);
  const redis = connectRedis(target, name, extra);
  redis.on('error', (err) => log.warn('redis connection error', { err }));
  log.info('redis durability', await checkDurability(redis, durabilityFromEnv(env), log));
  return { target, redis };
}

/**
 * The start-up check of every service: refuses a Redis that would lose what Taskline acknowledges.
 * AOF must be on (`INFO persistence`); `maxmemory-policy` must be `noeviction` (an evicted task
 * record or stream breaks every script's all-or-nothing promise); `appendfsync` must keep
 * `TASKLINE_DURABILITY`'s promise. `appendfsync` is only readable through `CONFIG GET`, which
 * managed Redis services often block: there the setting is trusted and a warning says so, never a
 * refusal that would make the service crash-loop. On a Redis Cluster every node is checked.
 */
export async function checkDurability(
  redis: Redis,
  check: DurabilityCheck,
  log: Warn,
): Promise<DurabilityReport> {
  // A service (re)started while Redis is down or still loading waits for it: exiting would turn
  // a Redis restart into a crash loop of every service started meanwhile.
  for (;;) {
    // A cluster client queues commands until its first connection instead of failing them: say
    // that it waits, or a service stuck at start would be silent.
    const silent = setTimeout(
      () => log.warn('redis_unavailable', { reason: 'no_answer_yet' }),
      START_RETRY_MS,
    );
    try {
      const report = await readDurability(redis, check, log);
      if (report !== STILL_LOADING) return report;
      log.warn('redis_unavailable', { reason: 'loading', retry_ms: START_RETRY_MS });
    } catch (err) {
      const reason = redisUnavailableReason(err);
      if (reason === null) throw err;
      log.warn('redis_unavailable', { reason, retry_ms: START_RETRY_MS });
    } finally {
      clearTimeout(silent);
    }
    await sleep(START_RETRY_MS);
  }
}

/** How often the start-up check tries again while Redis cannot answer. */
const START_RETRY_MS = 500;

/** A node still loading its data at start: what it says of its AOF is not true yet. */
const STILL_LOADING = Symbol('still loading');

async function readDurability(
  redis: Redis,
  check: DurabilityCheck,
  log: Warn,
): Promise<DurabilityReport | typeof STILL_LOADING> {
  if (!isCluster(redis)) return checkNode(redis, check, log);
  // Every node of a cluster, replicas too: a failover makes any replica the primary of its slots.
  await redis.ping();
  const nodes = (redis as unknown as { nodes(role: 'all'): Redis[] }).nodes('all');
  const reports = await Promise.all(nodes.map((node) => checkNode(node, check, log)));
  const loaded = reports.filter((r): r is DurabilityReport => r !== STILL_LOADING);
  return loaded.length < reports.length ? STILL_LOADING : { ...loaded[0]!, nodes: nodes.length };
}

async function checkNode(
  redis: Redis,
  check: DurabilityCheck,
  log: Warn,
): Promise<DurabilityReport | typeof STILL_LOADING> {
  const persistence = infoFields(await redis.info('persistence'));
  // Redis 7 answers INFO while it loads its data at start and says aof_enabled:0 until the load
  // is done; ioredis sends INFO before its own ready check has seen the end. Refused then, a Redis
  // restarted from its AOF would turn every service started meanwhile into a crash loop.
  if (persistence.loading === '1') return STILL_LOADING;
  const aofEnabled = persistence.aof_enabled === '1';
  if (!aofEnabled && check.requireAof) {
    throw refused(
      'Redis runs without AOF (aof_enabled:0, appendonly no): acknowledged tasks could be lost. ' +
        'Start Redis with --appendonly yes (TASKLINE_REQUIRE_AOF=false overrides, for benchmarks only).',
    );
  }
  const maxmemoryPolicy =
    infoFields(await redis.info('memory')).maxmemory_policy ?? (await configGet(redis, 'maxmemory-policy'));
  if (maxmemoryPolicy !== null && maxmemoryPolicy !== 'noeviction') {
    throw refused(
      `Redis runs with maxmemory-policy ${maxmemoryPolicy}: it may evict task records and event ` +
        'streams. Set maxmemory-policy noeviction (a full Redis then refuses writes, which clients retry).',
    );
  }
  const appendfsync = await configGet(redis, 'appendfsync');
  const report = { durability: check.level, aofEnabled, appendfsync, maxmemoryPolicy };
  if (!aofEnabled) {
    log.warn('Redis runs without AOF (TASKLINE_REQUIRE_AOF=false): a Redis crash loses acknowledged tasks');
    return report;
  }
  if (appendfsync === null) {
    log.warn('CONFIG GET is not allowed on this Redis: trusting that it runs appendfsync to match', {
      durability: check.level,
      required: KEEPS[check.level],
    });
  } else if (!KEEPS[check.level].includes(appendfsync)) {
    throw refused(
      `Redis runs with appendfsync ${appendfsync}, which does not keep TASKLINE_DURABILITY=${check.level}. ` +
        `Set appendfsync ${check.level === 'always' ? 'always' : 'always or everysec'} in Redis` +
        (check.level === 'always'
          ? ', or opt in to TASKLINE_DURABILITY=everysec (a power loss may then lose about a second of acknowledged tasks).'
          : '.'),
    );
  }
  return report;
}

/** A setting through `CONFIG GET`, or null where Redis refuses CONFIG (renamed, ACL, managed). */
async function configGet(redis: Redis, name: string): Promise<string | null> {
  try {
    const [, value] = (await redis.config('GET', name)) as string[];
    return value ?? null;
  } catch (err) {
    // Redis answered with an error: CONFIG is blocked here. Anything else (a dropped connection) is not ours to hide.
    if ((err as { name?: unknown }).name === 'ReplyError') return null;
    throw err;
  }
}

function infoFields(info: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of info.split('\r\n')) {
    const at = line.indexOf(':');
    if (at > 0 && !line.startsWith('#')) out[line.slice(0, at)] = line.slice(at + 1);
  }
  return out;
}

const refused = (message: string) => new TasklineError('internal_error', message);

/** How long the count of connected replicas is reused before `INFO replication` is read again. */
const REPLICA_COUNT_TTL_MS = 1000;

/**
 * Waits, after an acknowledged write, for every replica Redis reports connected to have it
 * (`WAIT`), so a failover to a replica does not lose what a client was told. `WAIT` counts the
 * writes of the connection it is sent on: it must go on the connection that wrote, after the write.
 * On a Redis Cluster that is the connection to the primary that owns each written key's slot (a
 * create writes the task's slot and the scheduler's): one `WAIT` per such node, at once.
 * While it blocks, that connection's later commands wait behind it (replication normally answers
 * within a round trip). Without replicas it costs nothing: the count is read at most once a second,
 * behind the writes.
 */
export class ReplicaAck {
  private readonly nodes = new WeakMap<Redis, NodeReplicas>();

  constructor(
    private readonly redis: Redis,
    private readonly timeoutMs: number,
  ) {}

  /**
   * Resolves once every connected replica has this connection's writes to `keys` (on one Redis,
   * all its writes); else `replication_timeout`.
   */
  async wait(keys: readonly string[]): Promise<void> {
    await Promise.all(this.writers(keys).map((node) => this.waitOn(node)));
  }

  /** The connections that wrote `keys`: the one Redis, or each owning primary of a cluster. */
  private writers(keys: readonly string[]): Redis[] {
    return [...new Set(keys.map((key) => nodeOf(this.redis, key)))];
  }

  private async waitOn(node: Redis): Promise<void> {
    let replicas = this.nodes.get(node);
    if (!replicas) this.nodes.set(node, (replicas = new NodeReplicas(node)));
    const count = await replicas.connected();
    if (count === 0) return;
    const acked = await node.wait(count, this.timeoutMs);
    if (acked >= count) return;
    // A replica that left meanwhile no longer counts: read the count afresh before refusing.
    const now = await replicas.connected(true);
    if (acked >= now) return;
    throw new TasklineError(
      'replication_timeout',
      `The write reached ${acked} of ${now} Redis replicas within ${this.timeoutMs} ms; retry shortly.`,
      { retryAfterS: 1 },
    );
  }
}

/**
 * The replicas one Redis (one cluster primary) reports connected, read at most once a second. Only
 * the first read is waited for: later ones refresh the count behind the writes that use it, so a
 * create after a quiet second pays no extra round trip. A replica that joined is counted a read
 * later either way; one that left shows as a short `WAIT`, which reads the count afresh (`fresh`).
 */
class NodeReplicas {
  private replicas: number | null = null;
  private readAt = Number.NEGATIVE_INFINITY;
  private reading: Promise<number> | null = null;

  constructor(private readonly node: Redis) {}

  connected(fresh = false): Promise<number> {
    if (fresh || this.replicas === null) return this.read();
    if (Date.now() - this.readAt >= REPLICA_COUNT_TTL_MS) this.read().catch(() => undefined);
    return Promise.resolve(this.replicas);
  }

  private read(): Promise<number> {
    this.reading ??= this.node
      .info('replication')
      .then((info) => {
        // Replicas still in their first sync cannot acknowledge yet (nor be promoted with the data).
        this.replicas = Object.entries(infoFields(info)).filter(
          ([field, value]) => /^slave\d+$/.test(field) && value.includes('state=online'),
        ).length;
        this.readAt = Date.now();
        return this.replicas;
      })
      .finally(() => (this.reading = null));
    return this.reading;
  }
}
