/**
 * The index 2025-11-25 `tasks/list` pages through (`tl:mcp:tasks:{<tenant>}`) stays bounded: the
 * scheduler's retention sweep trims and expires it as it does the operator index, and a page reads
 * a bounded number of entries however many dead ones lie ahead of the live tasks.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { toolTaskIndex } from '@taskline/engine/keys';
import { startStack, until } from '../../../test/conformance/stack.js';
import { rpc } from './helpers.js';

/** The least TASKLINE_OPERATOR_INDEX_MAX takes. */
const MAX = 100;
/** `n` index entries (score, member) of tasks whose records expired long ago, oldest first. */
const deadEntries = (n: number) =>
  Array.from({ length: n }, (_, i) => [
    0,
    `${String(1000 + i).padStart(15, '0')}:task_${String(i).padStart(26, '0')}`,
  ]).flat() as (number | string)[];

async function v1Client(url: string, key: string): Promise<Client> {
  const client = new Client({ name: 't', version: '1' }, { capabilities: { tasks: { list: {} } } });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
    }),
  );
  return client;
}

describe("MCP tool-task index: bounded by the retention sweep and by each page's reads", () => {
  let stack: Awaited<ReturnType<typeof startStack>>;
  let url: string;

  before(async () => {
    stack = await startStack({
      fixtures: true,
      env: {
        TASKLINE_API_KEYS: 'tenant-a:key-a-secret,tenant-b:key-b-secret',
        TASKLINE_RETENTION_SWEEP_MS: '200',
        TASKLINE_OPERATOR_INDEX_MAX: String(MAX),
        TASKLINE_RATE_LIMIT_BURST: '100',
      },
    });
    url = stack.replicas[0]!.url;
  });
  after(() => stack.stop());

  it('the sweep keeps the newest entries of a tenant that created and sets the index to expire', async () => {
    const redis = stack.cluster.store.redis;
    const key = toolTaskIndex('tenant-a');
    await redis.zadd(key, ...deadEntries(MAX + 50));
    assert.equal(await redis.pttl(key), -1);
    const created = await rpc(
      url,
      'tools/call',
      { name: 'slow_compute', arguments: { seconds: 0 } },
      { token: 'key-a-secret' },
    );
    const id = created.message.result.taskId as string;
    await until('the sweep trims the index', async () =>
      (await redis.zcard(key)) <= MAX ? true : undefined,
    );
    const ttl = await redis.pttl(key);
    assert.ok(ttl > 0 && ttl <= 24 * 3600 * 1000, `expires one task retention on (pttl ${ttl})`);
    const newest = await redis.zrange(key, -1, -1);
    assert.ok(newest[0]!.endsWith(`:${id}`), 'the live task, the newest, stays indexed');
  });

  it('a page reads at most 1,000 entries: dead ones ahead of it make a short page with a cursor', async () => {
    const redis = stack.cluster.store.redis;
    const key = toolTaskIndex('tenant-b');
    // Entries whose records expired: a tenant that never listed, nor created since the sweep.
    await redis.zadd(key, ...deadEntries(2500));
    const client = await v1Client(url, 'key-b-secret');
    const first = await client.experimental.tasks.listTasks();
    assert.deepEqual(first.tasks, []);
    assert.ok(first.nextCursor, 'a short page still says where to go on');
    assert.equal(await redis.zcard(key), 1500, 'one page read (and dropped) 1,000 dead entries');
    let cursor: string | undefined = first.nextCursor;
    let pages = 1;
    while (cursor) {
      cursor = (await client.experimental.tasks.listTasks(cursor)).nextCursor;
      pages++;
    }
    assert.equal(pages, 3);
    assert.equal(await redis.zcard(key), 0);
    await client.close();
  });
});
