// A real Redis Cluster of the test's own (3 primaries, 3 replicas, AOF).
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './ports.js';
import { startRedisServer, type RedisServer } from './redis-server.js';

const run = promisify(execFile);

/** How long a node may be unreachable before its replica is promoted: short, so a test's failover takes seconds. */
const NODE_TIMEOUT_MS = 1500;

export interface RedisClusterOptions {
  /** `always` (Taskline's default) or `everysec`, on every node. */
  appendfsync?: 'always' | 'everysec';
}

/**
 * A real Redis Cluster of the test's own: 3 primaries with one replica each, AOF on every node,
 * in one temporary folder, on free ports, every process stopped by PID. `url` names it the way
 * Taskline's connection factory does (`redis-cluster://`, one seed; the client discovers the rest).
 */
export interface RedisCluster {
  readonly url: string;
  /** `host:port` of every node, comma separated: a value for `TASKLINE_REDIS_CLUSTER_NODES`. */
  readonly seeds: string;
  /** Every node, primaries and replicas, as started (roles change with failovers). */
  readonly nodes: readonly RedisServer[];
  /** The nodes that are primaries now, by `CLUSTER NODES`. */
  primaries(): Promise<RedisServer[]>;
  /** The primary that owns `key`'s slot now. */
  primaryOf(key: string): Promise<RedisServer>;
  /**
   * SIGKILL a primary and wait until its replica took over and the cluster is healthy again; the
   * killed node is then started from its AOF and rejoins as a replica. Returns the promoted node.
   */
  killPrimary(primary: RedisServer): Promise<RedisServer>;
  /** `CLUSTER FAILOVER` on `primary`'s replica: a planned switch, nothing lost. Returns the new primary. */
  failover(primary: RedisServer): Promise<RedisServer>;
  /** Resolves once every node reports `cluster_state:ok`, every slot is served and every replica is in sync. */
  healthy(): Promise<void>;
  stop(): Promise<void>;
}

export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisCluster> {
  const root = await mkdtemp(join(tmpdir(), 'taskline-cluster-'));
  const nodes: RedisServer[] = [];
  try {
    for (let i = 0; i < 6; i++) {
      // The cluster bus gets a free port of its own: the default (port + 10000) may be taken or past 65535.
      const bus = await freePort();
      nodes.push(
        await startRedisServer({
          appendfsync: options.appendfsync,
          dir: await mkdtemp(join(root, `node${i}-`)),
          args: [
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            'nodes.conf',
            '--cluster-port',
            String(bus),
            '--cluster-node-timeout',
            String(NODE_TIMEOUT_MS),
            // A replica that lost its primary long ago may still be promoted: tests kill on purpose.
            '--cluster-replica-validity-factor',
            '0',
            // Replicas sync at once, not after the default 5 s wait for more replicas.
            '--repl-diskless-sync-delay',
            '0',
          ],
        }),
      );
    }
    const addresses = nodes.map((n) => `127.0.0.1:${n.port}`);
    await run('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', '1', '--cluster-yes']);
  } catch (err) {
    await Promise.all(nodes.map((n) => n.stop()));
    await rm(root, { recursive: true, force: true });
    throw err;
  }

  const byPort = (port: number) => nodes.find((n) => n.port === port)!;
  const alive = new Set(nodes);

  const cluster: RedisCluster = {
    url: `redis-cluster://127.0.0.1:${nodes[0]!.port}`,
    seeds: nodes.map((n) => `127.0.0.1:${n.port}`).join(','),
    nodes,
    async primaries() {
      const table = await clusterNodes([...alive]);
      return table.filter((n) => n.primary && !n.failed).map((n) => byPort(n.port));
    },
    async primaryOf(key) {
      const slot = Number(await cli(anyOf(alive), 'CLUSTER', 'KEYSLOT', key));
      const table = await clusterNodes([...alive]);
      const owner = table.find(
        (n) => n.primary && !n.failed && n.slots.some(([a, b]) => slot >= a && slot <= b),
      );
      if (!owner) throw new Error(`no primary serves slot ${slot}`);
      return byPort(owner.port);
    },
    async killPrimary(primary) {
      const before = await clusterNodes([...alive]);
      const id = before.find((n) => n.port === primary.port)?.id;
      const replicas = new Set(before.filter((n) => n.primaryId === id).map((n) => n.port));
      if (replicas.size === 0) throw new Error(`${primary.port} has no replica to promote`);
      alive.delete(primary);
      await primary.kill();
      const promoted = await until(async () => {
        const table = await clusterNodes([...alive]);
        return table.find((n) => replicas.has(n.port) && n.primary && n.slots.length > 0) ?? null;
      }, `a replica of ${primary.port} promoted`);
      await cluster.healthy();
      // Back from its AOF: it learns from the cluster that it was replaced and follows the new primary.
      await primary.restart();
      alive.add(primary);
      await cluster.healthy();
      return byPort(promoted.port);
    },
    async failover(primary) {
      const table = await clusterNodes([...alive]);
      const id = table.find((n) => n.port === primary.port)?.id;
      const replica = table.find((n) => n.primaryId === id && !n.failed);
      if (!replica) throw new Error(`${primary.port} has no replica to fail over to`);
      await cli(byPort(replica.port), 'CLUSTER', 'FAILOVER');
      await until(async () => {
        const now = await clusterNodes([...alive]);
        return now.find((n) => n.port === replica.port && n.primary) ?? null;
      }, `${replica.port} promoted`);
      await cluster.healthy();
      return byPort(replica.port);
    },
    async healthy() {
      await until(async () => {
        for (const node of alive) {
          const info = await cli(node, 'CLUSTER', 'INFO');
          if (!/cluster_state:ok/.test(info) || !/cluster_slots_ok:16384/.test(info)) return null;
        }
        // Every node must agree on the primaries, or a client may be sent to a stale owner.
        const views = await Promise.all([...alive].map((n) => clusterNodes([n])));
        const primaries = views.map((v) =>
          v
            .filter((n) => n.primary && !n.failed && n.slots.length > 0)
            .map((n) => n.port)
            .sort()
            .join(','),
        );
        if (!primaries.every((p) => p === primaries[0])) return null;
        // And every replica has its primary's data: one still in its first sync cannot take over.
        for (const node of alive) {
          const info = await cli(node, 'INFO', 'replication');
          if (info.includes('role:slave') && !/master_link_status:up/.test(info)) return null;
          if (/master_sync_in_progress:1/.test(info)) return null;
        }
        return true;
      }, 'cluster_state:ok on every node');
    },
    async stop() {
      await Promise.all(nodes.map((n) => n.stop()));
      await rm(root, { recursive: true, force: true });
    },
  };
  await cluster.healthy();
  return cluster;
}

interface NodeRow {
  id: string;
  port: number;
  primary: boolean;
  failed: boolean;
  /** The primary this node replicates, for a replica. */
  primaryId: string | null;
  slots: [number, number][];
}

/** `CLUSTER NODES` as the first node that answers sees it. */
async function clusterNodes(from: RedisServer[]): Promise<NodeRow[]> {
  let lastErr: unknown;
  for (const node of from) {
    try {
      const text = await cli(node, 'CLUSTER', 'NODES');
      return text
        .trim()
        .split('\n')
        .map((line) => {
          const [id, addr, flags, master, , , , , ...slots] = line.split(' ');
          const port = Number(addr!.split('@')[0]!.split(':').pop());
          return {
            id: id!,
            port,
            primary: flags!.includes('master'),
            failed: flags!.includes('fail'),
            primaryId: master === '-' ? null : master!,
            slots: slots
              .filter((s) => !s.startsWith('['))
              .map((s) => {
                const [a, b] = s.split('-');
                return [Number(a), Number(b ?? a)] as [number, number];
              }),
          };
        });
    } catch (err) {
      lastErr = err;
    }
  }
  throw lastErr instanceof Error ? lastErr : new Error('no cluster node answered');
}

async function cli(node: RedisServer, ...args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-p', String(node.port), ...args]);
  return stdout;
}

function anyOf(nodes: Set<RedisServer>): RedisServer {
  return nodes.values().next().value!;
}

/** Polls `probe` until it returns something other than null/undefined, for at most 30 s. */
async function until<T>(probe: () => Promise<T | null | undefined>, what: string): Promise<T> {
  const deadline = Date.now() + 30_000;
  let lastErr: unknown = null;
  while (Date.now() < deadline) {
    try {
      const found = await probe();
      if (found !== null && found !== undefined) return found;
    } catch (err) {
      lastErr = err; // a node restarting or still loading its AOF: ask again
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`Redis Cluster: timed out waiting for ${what}${lastErr ? ` (${String(lastErr)})` : ''}`);
}
