/** What `scanKeys` needs of an ioredis `Redis` or `Cluster` (this package depends on no client). */
interface Scannable {
  scan(
    cursor: string,
    match: 'MATCH',
    pattern: string,
    count: 'COUNT',
    n: number,
  ): Promise<[string, string[]]>;
  nodes?(role: 'master'): Scannable[];
}

/**
 * Every key matching `pattern`. `KEYS` and `SCAN` walk one node: on a Redis Cluster (Taskline's
 * factory hands back a `Cluster` typed as `Redis`) every primary is walked, each owning its slots'
 * keys.
 */
export async function scanKeys(redis: unknown, pattern: string): Promise<string[]> {
  const client = redis as Scannable;
  const nodes = typeof client.nodes === 'function' ? client.nodes('master') : [client];
  const out: string[] = [];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      out.push(...keys);
    } while (cursor !== '0');
  }
  return out;
}
