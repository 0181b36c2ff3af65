/**
 * A scheduler that hangs (a stopped process, a stuck event loop) still accepts TCP connections:
 * the worker must give up on it by itself and not go back to it next.
 */
import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { startControlServer, type ControlServer } from '../src/index.js';
import { TEST_SECURITY, testWorker } from './worker.js';

async function until(what: string, ok: () => boolean, ms: number): Promise<void> {
  for (const end = Date.now() + ms; !ok(); await sleep(20))
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
}

/** A listener that accepts connections and never says a word: what a SIGSTOPped scheduler is to a client. */
async function hungScheduler(): Promise<{ server: Server; address: string; connections: () => number }> {
  const sockets: Socket[] = [];
  const server = createServer((socket) => void sockets.push(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const close = server.close.bind(server);
  server.close = (cb) => {
    for (const s of sockets) s.destroy();
    return close(cb);
  };
  const port = (server.address() as { port: number }).port;
  return { server, address: `127.0.0.1:${port}`, connections: () => sockets.length };
}

test('a hung scheduler is skipped, and a redirect to it is not followed by a second try of it', async (t) => {
  const hung = await hungScheduler();
  // The leader (by what Redis last said) is the hung one: a standby sends the worker there.
  const start = (id: string, leads: boolean): Promise<ControlServer> =>
    startControlServer({
      address: '127.0.0.1:0',
      schedulerId: id,
      security: TEST_SECURITY,
      heartbeatMs: 50,
      workerTimeoutMs: 1000,
      leadership: { isLeader: () => leads, leaderAddr: async () => hung.address },
    });
  const [standby, leader] = await Promise.all([start('standby', false), start('leader', true)]);
  // The standby first; the hung scheduler is next in the list, and the live leader last.
  const worker = testWorker([`127.0.0.1:${standby.port}`, hung.address, `127.0.0.1:${leader.port}`]);
  t.after(async () => {
    worker.close();
    await Promise.all([standby.close(), leader.close(), new Promise((r) => hung.server.close(r))]);
  });
  // Unbounded, the wait for the hung one's welcome would never end; the bound is the client's own.
  // Both ends: the leader counts the worker as it sends its welcome, before the worker reads it.
  const live = `127.0.0.1:${leader.port}`;
  await until(
    'the worker registered with the live leader and saw its welcome',
    () => leader.workers().length === 1 && worker.connectedTo === live,
    20_000,
  );
  assert.equal(
    hung.connections(),
    1,
    'the hung scheduler was tried once, by the redirect, not again from the list',
  );
});
