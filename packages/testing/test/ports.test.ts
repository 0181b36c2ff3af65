import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { freePort, RESERVED } from '../src/ports.js';

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

test('freePort hands out no port another running process holds, and takes over those of a dead one', async () => {
  // Another test file's process holds these (the test runner's pid: alive), as while its Redis is
  // down for a restart and the port reads free; before the claims, another process got them too.
  mkdirSync(RESERVED, { recursive: true });
  const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
  const held = new Set<number>();
  for (let port = 10_000; port < low; port += 4) {
    try {
      writeFileSync(join(RESERVED, String(port)), String(process.ppid), { flag: 'wx' });
      held.add(port);
    } catch {
      // Held already by a process of its own.
    }
  }
  try {
    const ports: number[] = [];
    for (let i = 0; i < 1000; i++) ports.push(await freePort());
    assert.deepEqual(
      ports.filter((p) => held.has(p)),
      [],
      'no port of a running process',
    );
    // A process that died (no such pid) holds nothing: its claims are taken over.
    for (const port of held) writeFileSync(join(RESERVED, String(port)), '4194305');
    const taken: number[] = [];
    for (let i = 0; i < 1000 && taken.length === 0; i++) {
      const port = await freePort();
      if (held.has(port)) taken.push(port);
    }
    assert.equal(taken.length, 1, 'a dead process’s port is handed out again');
    assert.equal(readFileSync(join(RESERVED, String(taken[0])), 'utf8'), String(process.pid));
  } finally {
    for (const port of held) rmSync(join(RESERVED, String(port)), { force: true });
  }
});
