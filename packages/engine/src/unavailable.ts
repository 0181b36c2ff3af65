/**
 * Redis answers that mean "try again shortly", not "this request is wrong": the caller answers
 * 503 with Retry-After (LMSP `unavailable`, the matching JSON-RPC error on MCP) instead of 500.
 * Each has a reason, a bounded label for `taskline_redis_unavailable_total`.
 */
import { TasklineError } from './errors.js';

const TRY_AGAIN_REPLIES = {
  /** maxmemory reached under `noeviction`: writes are refused until memory is freed. */
  OOM: 'oom',
  /** A replica (after a failover the client still talks to the old primary). */
  READONLY: 'readonly',
  /** A script or function past `busy-reply-threshold`. */
  BUSY: 'busy',
  /** A replica that lost its primary and serves no stale data. */
  MASTERDOWN: 'masterdown',
  /** Redis is still loading its AOF or RDB after a restart. */
  LOADING: 'loading',
  /** `min-replicas-to-write` not met. */
  NOREPLICAS: 'noreplicas',
  /** Redis Cluster: a slot migrating or the cluster down. */
  TRYAGAIN: 'tryagain',
  CLUSTERDOWN: 'clusterdown',
  /**
   * Redis Cluster: the node no longer owns the slot. The client follows these itself; one that
   * reaches the caller (a failover moving slots under a command) was refused, never run.
   */
  MOVED: 'moved',
  ASK: 'moved',
} as const;

export type RedisUnavailableReason =
  | (typeof TRY_AGAIN_REPLIES)[keyof typeof TRY_AGAIN_REPLIES]
  /** The connection is down or dropped mid-command. */
  | 'connection'
  /** Redis did not answer within the connection's `commandTimeout` (a stalled server or network). */
  | 'timeout'
  /** A write did not reach every connected replica in time (`replication_timeout`). */
  | 'replication';

/** Every reason, for documents and dashboards. */
export const REDIS_UNAVAILABLE_REASONS: readonly RedisUnavailableReason[] = [
  'connection',
  'timeout',
  'replication',
  ...new Set(Object.values(TRY_AGAIN_REPLIES)),
];

const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE']);
const ABORTED_BY_CLOSE = 'Command aborted due to connection close';
const REDIRECTIONS_SPENT = 'Too many Cluster redirections. Last error: ';
const WAIT_ON_REPLICA = 'ERR WAIT cannot be used with replica instances';
/**
 * A command sent on a connection still in subscriber mode: a Redis Cluster client reconnecting a
 * subscriber during a failover sent a command there (seen as a request's 500 under chaos). Refused,
 * never run: the connection is not ready yet.
 */
const SUBSCRIBER_CONTEXT = /^ERR Can't execute '[^']+': only \(P\|S\)SUBSCRIBE/;
/** The same refusal made by ioredis itself, which knows the connection is in subscriber mode: never sent. */
const SUBSCRIBER_MODE = 'Connection in subscriber mode, only subscriber commands may be used';
const CLUSTER_DOWN_MESSAGES = new Set([
  "Cluster isn't ready and enableOfflineQueue options is false",
  'None of startup nodes is available',
]);

/** Why `err` means "Redis cannot answer now, retry", or null for any other failure. */
export function redisUnavailableReason(err: unknown): RedisUnavailableReason | null {
  const e = err as { name?: unknown; message?: unknown; code?: unknown } | null;
  if (!e) return null;
  // LMSP answers it with its own code; surfaces without one (MCP) answer it as "try again".
  if (err instanceof TasklineError && err.code === 'replication_timeout') return 'replication';
  // Raised by Taskline itself where it must pick a cluster node (`nodeOf`) and knows none yet.
  if (err instanceof TasklineError && err.code === 'unavailable') return 'clusterdown';
  if (e.name === 'MaxRetriesPerRequestError' || e.message === 'Connection is closed.') return 'connection';
  if (e.message === SUBSCRIBER_MODE) return 'connection';
  // A command of an auto-pipeline cut by the connection's close (ioredis's abortIncompletePipelines):
  // Redis may or may not have run it.
  if (e.name === 'AbortError' && e.message === ABORTED_BY_CLOSE) return 'connection';
  // ioredis's own error for a command past `commandTimeout`; Redis may still run it later.
  if (e.message === 'Command timed out') return 'timeout';
  // Redis Cluster: every node unreachable, or the client reconnecting to them.
  if (e.name === 'ClusterAllFailedError' || CLUSTER_DOWN_MESSAGES.has(e.message as string))
    return 'connection';
  if (typeof e.code === 'string' && CONNECTION_CODES.has(e.code)) return 'connection';
  // Redis Cluster: the client followed MOVED replies until its limit (two nodes still disagreeing
  // mid-failover) or lost the node it was sent to; the reason is that of its last error.
  if (typeof e.message === 'string' && e.message.startsWith(REDIRECTIONS_SPENT)) {
    const last = e.message.slice(REDIRECTIONS_SPENT.length);
    return /^ReplyError: (MOVED|ASK) /.test(last) ? 'moved' : 'connection';
  }
  // A Redis error reply starts with its code, inside a script too (Redis 7 keeps it in front).
  if (e.name !== 'ReplyError' || typeof e.message !== 'string') return null;
  // `WAIT` sent to a primary that a failover has just made a replica: the write it followed is
  // not known to be replicated, so it is not acknowledged.
  if (e.message.startsWith(WAIT_ON_REPLICA)) return 'readonly';
  if (SUBSCRIBER_CONTEXT.test(e.message)) return 'connection';
  const space = e.message.indexOf(' ');
  const code = space < 0 ? e.message : e.message.slice(0, space);
  // A MULTI that Redis discarded: the reason is the refusal of a command it queued.
  if (code === 'EXECABORT') {
    const previous = (err as { previousErrors?: unknown[] }).previousErrors ?? [];
    return previous.map(redisUnavailableReason).find((r) => r !== null) ?? null;
  }
  return Object.hasOwn(TRY_AGAIN_REPLIES, code)
    ? TRY_AGAIN_REPLIES[code as keyof typeof TRY_AGAIN_REPLIES]
    : null;
}

/** Failures after which a write may have been applied all the same: Redis never said it was not. */
const UNCONFIRMED = new Set<RedisUnavailableReason>(['timeout', 'connection', 'replication']);
const unconfirmedCreates = new WeakMap<object, string>();

/**
 * Whether a create that failed with `err` may still have made its task `id` (its write timed out
 * or lost its connection once sent, or a replica did not confirm it); if so the error is marked
 * with the id, for the answer to name it (`unconfirmedCreate`). Other failures wrote nothing.
 */
export function markUnconfirmedCreate(err: unknown, id: string): boolean {
  const reason = redisUnavailableReason(err);
  if (!reason || !UNCONFIRMED.has(reason) || typeof err !== 'object' || err === null) return false;
  unconfirmedCreates.set(err, id);
  return true;
}

/** The task a failed create may have made (see markUnconfirmedCreate), or undefined. */
export function unconfirmedCreate(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null ? unconfirmedCreates.get(err) : undefined;
}
