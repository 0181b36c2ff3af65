/**
 * The index 2025-11-25 `tasks/list` pages through (`tl:mcp:tasks:{<tenant>}`) stays bounded: the
 * scheduler's index sweep trims and expires it as it does the operator index, and a page reads
 * a bounded number of entries however many dead ones lie ahead of the live tasks; yet no tool task
 * that has not ended leaves the list.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { toolTaskIndex } from '@taskline/engine/keys';
import { startMcpStack, until } from '@taskline/test-support/mcp-stack';
import { pollTask, rpc } from '@taskline/test-support/mcp';

/** The least TASKLINE_OPERATOR_INDEX_MAX takes. */
const MAX = 100;
/**
 * TASKLINE_TASK_RETENTION_S here: a tenant's index expires this long after the sweep that last
 * visited it. The sweeps (every 200 ms) must never be this far apart, or the index of a tenant
 * with unfinished tasks expires under the test: at 2 s a starved CI host once let it.
 */
const RETENTION_S = 6;
/** `n` index entries (score, member) of tasks whose records expired long ago, oldest first. */
const deadEntries = (n: number) =>
  Array.from({ length: n }, (_, i) => [
    0,
    `${String(1000 + i).padStart(15, '0')}:task_${String(i).padStart(26, '0')}`,
  ]).flat() as (number | string)[];

async function v1Client(url: string, key: string): Promise<Client> {
  const client = new Client(
    { name: 't', version: '1' },
    { capabilities: { elicitation: {}, tasks: { list: {}, cancel: {} } } },
  );
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
    }),
  );
  return client;
}

describe("MCP tool-task index: bounded by the index sweep and by each page's reads", () => {
  let stack: Awaited<ReturnType<typeof startMcpStack>>;
  let url: string;

  before(async () => {
    stack = await startMcpStack({
      fixtures: true,
      env: {
        TASKLINE_API_KEYS: 'tenant-a:key-a-secret,tenant-b:key-b-secret,tenant-c:key-c-secret',
        TASKLINE_TASK_RETENTION_S: String(RETENTION_S),
        TASKLINE_EVENT_RETENTION_S: String(RETENTION_S),
        TASKLINE_INDEX_SWEEP_MS: '200',
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

  it('keeps a tool task that has not ended listed past the bound and past the retention; ended ones age out', async () => {
    const redis = stack.cluster.store.redis;
    const key = toolTaskIndex('tenant-c');
    const token = 'key-c-secret';
    const client = await v1Client(url, token);
    const compute = async (seconds: number) =>
      (await rpc(url, 'tools/call', { name: 'slow_compute', arguments: { seconds } }, { token })).message
        .result.taskId as string;
    // One of each era: a 2025-11-25 task waiting for its input, a 2026-07-28 one running.
    const asking = (
      await client.request(
        { method: 'tools/call', params: { name: 'confirm_delete', arguments: {}, task: { ttl: 60_000 } } },
        CreateTaskResultSchema,
      )
    ).task.taskId;
    const running = await compute(600);
    await pollTask(url, asking, (t) => t.status === 'input_required', { token });
    await pollTask(url, running, (t) => t.statusMessage === 'running', { token });
    const ended = await compute(0);
    await pollTask(url, ended, (t) => t.status === 'completed', { token });
    // MAX newer entries (of tasks whose records expired) push all three past the bound.
    const later = Date.now() + 60_000;
    const newer = Array.from({ length: MAX }, (_, i) => [
      0,
      `${String(later + i).padStart(15, '0')}:task_${String(i).padStart(26, 'z')}`,
    ]).flat() as (number | string)[];
    await redis.zadd(key, ...newer);
    await compute(0); // a create: the next sweeps visit the tenant
    // An entry whose record is gone is dropped only past the create grace (a create may still be
    // writing its record): a minute after the task's create, so the wait is bounded past it.
    await until(
      'the sweep trims the ended task',
      async () => ((await redis.zrange(key, 0, -1)).some((m) => m.endsWith(`:${ended}`)) ? undefined : true),
      150_000,
    );
    assert.ok((await redis.zcard(key)) <= MAX + 3, 'bounded: the newest MAX and the unfinished');
    const listed = async () => {
      const ids: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.experimental.tasks.listTasks(cursor);
        ids.push(...page.tasks.map((t) => t.taskId));
        cursor = page.nextCursor;
      } while (cursor);
      return ids;
    };
    let ids = await listed();
    const index = async () => `index of ${await redis.zcard(key)} entries, pttl ${await redis.pttl(key)}`;
    assert.ok(
      ids.includes(asking) && ids.includes(running),
      `past the bound: ${JSON.stringify(ids)}, ${await index()}`,
    );
    // No create for longer than the retention: the tenant's index would have expired.
    await sleep(RETENTION_S * 1000 + 1500);
    ids = await listed();
    assert.ok(
      ids.includes(asking) && ids.includes(running),
      `past the retention: ${JSON.stringify(ids)}, ${await index()}`,
    );
    // Once they end, they age out, and the index with them.
    await client.experimental.tasks.cancelTask(asking);
    await client.experimental.tasks.cancelTask(running);
    await until('the ended tasks leave the list and the index expires', async () =>
      (await listed()).length === 0 && (await redis.exists(key)) === 0 ? true : undefined,
    );
    await client.close();
  });
});
