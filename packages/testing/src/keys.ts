// Key helpers for tests: scan, flush and configure every node of a Redis or Redis Cluster.
/** What these helpers need of an ioredis `Redis` or `Cluster` (this package depends on no client). */
interface Scannable {
  scan(
    cursor: string,
    match: 'MATCH',
    pattern: string,
    count: 'COUNT',
    n: number,
  ): Promise<[string, string[]]>;
  flushall(): Promise<unknown>;
  ping(): Promise<unknown>;
  config(op: 'SET', name: string, value: string): Promise<unknown>;
  nodes?(role: 'master'): Scannable[];
}

/** Every primary of a cluster (each owning its slots' keys), or the one Redis. */
async function primaries(redis: unknown): Promise<Scannable[]> {
  const client = redis as Scannable;
  if (typeof client.nodes !== 'function') return [client];
  await client.ping(); // a cluster client knows its nodes once it is ready
  return client.nodes('master');
}

/** Empties the Redis, or every primary of a Redis Cluster (`FLUSHALL` reaches one node there). */
export async function flushAll(redis: unknown): Promise<void> {
  await Promise.all((await primaries(redis)).map((node) => node.flushall()));
}

/** `CONFIG SET` on the Redis, or on every primary of a Redis Cluster (it reaches one node there). */
export async function configSetAll(redis: unknown, name: string, value: string): Promise<void> {
  await Promise.all((await primaries(redis)).map((node) => node.config('SET', name, value)));
}

/**
 * Every key matching `pattern`. `KEYS` and `SCAN` walk one node: on a Redis Cluster (Taskline's
 * factory hands back a `Cluster` typed as `Redis`) every primary is walked, each owning its slots'
 * keys.
 */
export async function scanKeys(redis: unknown, pattern: string): Promise<string[]> {
  const out: string[] = [];
  for (const node of await primaries(redis)) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      out.push(...keys);
    } while (cursor !== '0');
  }
  return out;
}
