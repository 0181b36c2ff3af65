/**
 * However many tasks an MCP `subscriptions/listen` follows, it reads their records, and then their
 * event logs, in one Redis round trip each, counted through a proxy in front of one Redis (a
 * cluster client would follow the slot table past it: `pnpm test:cluster` leaves this file on one
 * Redis, where the count means what it says).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { taskKeys } from '@taskline/engine/keys';
import { until } from '@taskline/testing';
import { spawnApi, startRedisAndStore, type RedisAndStore } from './helpers.js';
import { listen, openTasks } from './listen.js';
import { roundTripProxy } from './round-trips.js';

const MAX_TASK_IDS = 5;

let stack: RedisAndStore;
before(async () => (stack = await startRedisAndStore()));
after(() => stack.close());

test("a listen reads its tasks' records in one Redis round trip, then their event logs in one", async () => {
  // An api behind the proxy, and tasks no listen has read yet: the first read of each is this listen's.
  const proxy = await roundTripProxy(stack.redisServer.url);
  const routed = await spawnApi(proxy.url, { TASKLINE_MCP_LISTEN_MAX_TASKS: String(MAX_TASK_IDS) });
  const ids = await openTasks(stack, MAX_TASK_IDS);
  try {
    const l = await listen(routed.base, ids);
    assert.equal(l.status, 200, JSON.stringify(l.messages));
    try {
      await until('a notification for every task', () =>
        l.messages.filter((m) => m.method === 'notifications/tasks').length >= ids.length ? true : undefined,
      );
    } finally {
      l.close();
      await l.done;
    }
  } finally {
    routed.child.kill('SIGKILL');
    await routed.exited;
    await proxy.close();
  }
  const reads: [string, (id: string) => string][] = [
    ['hgetall', (id) => taskKeys(id).task],
    ['xrange', (id) => taskKeys(id).events],
  ];
  for (const [command, key] of reads) {
    const first = ids.map((id) =>
      proxy.turns.find((turn) => turn.commands.some((c) => c[0] === command && c[1] === key(id))),
    );
    assert.ok(
      first.every((turn) => turn !== undefined),
      `some task was never read with ${command}`,
    );
    // One read per task in one round trip each would spread them over MAX_TASK_IDS turns.
    const trips = new Set(first.map((turn) => `${turn!.connection}:${turn!.index}`));
    assert.equal(trips.size, 1, `the ${ids.length} tasks' ${command} reads took ${trips.size} round trips`);
  }
});
