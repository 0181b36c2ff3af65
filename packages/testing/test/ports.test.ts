import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { test } from 'node:test';
import { freePort } from '../src/ports.js';

test("freePort picks below the kernel's ephemeral range, where no listen(0) or outgoing connection lands", async () => {
  const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
  const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
  for (const port of ports) assert.ok(port >= 1024 && port < low, `${port} below ${low}`);
  // Free indeed: a listener binds it.
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(ports[0], '127.0.0.1', resolve);
  });
  await new Promise((resolve) => server.close(resolve));
});

test('freePort never hands out a port twice in one process, even one not yet bound', async () => {
  // A cluster node's bus port is picked, then its client port, before either is bound: the second
  // pick must not land on the first (CI once saw a redis-server exit on such a collision).
  const ports = [];
  for (let i = 0; i < 2000; i++) ports.push(await freePort());
  assert.equal(new Set(ports).size, ports.length);
});
