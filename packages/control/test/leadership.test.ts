/** Workers follow leadership: capacity lives with the leader, wherever leadership moves. */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { startControlServer, type ControlServer } from '../src/index.js';
import { TEST_SECURITY, testWorker } from './worker.js';

async function until(what: string, ok: () => boolean): Promise<void> {
  for (const end = Date.now() + 30_000; !ok(); await sleep(20))
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
}

test('a leader that loses leadership sends its workers on to the new one', async (t) => {
  const leader = { id: 'a' };
  const addr = new Map<string, string>();
  const start = (id: string): Promise<ControlServer> =>
    startControlServer({
      address: '127.0.0.1:0',
      schedulerId: id,
      security: TEST_SECURITY,
      heartbeatMs: 50,
      workerTimeoutMs: 1000,
      leadership: { isLeader: () => leader.id === id, leaderAddr: async () => addr.get(leader.id) ?? null },
    });
  const [a, b] = await Promise.all([start('a'), start('b')]);
  addr.set('a', `127.0.0.1:${a.port}`).set('b', `127.0.0.1:${b.port}`);
  const worker = testWorker([addr.get('a')!, addr.get('b')!], 2);
  t.after(async () => {
    worker.close();
    await Promise.all([a.close(), b.close()]);
  });
  await until('the worker registered with a', () => a.workers().length === 1);

  // Leadership moves while the worker's stream to `a` stays open (a Redis stall past the lease).
  leader.id = 'b';
  // The worker learns it is welcomed a moment after b counts it.
  await until('the worker registered with b', () => b.workers().length === 1 && worker.connectedTo !== null);
  assert.deepEqual(b.capacity(), new Map([['m', 2]]));
  assert.equal(a.workers().length, 0, 'a standby counts no worker');
  assert.equal(worker.connectedTo, addr.get('b'));
});
