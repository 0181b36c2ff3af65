import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createServer, type Socket } from 'node:net';
import { test } from 'node:test';
import { startRedis } from '../src/index.js';

test('a restart whose port went to a program that never answers fails, and does not hang', async () => {
  const redis = await startRedis();
  await redis.kill();
  // Another program took the port while the server was down, and reads without ever answering.
  const sockets: Socket[] = [];
  const squatter = createServer((s) => void sockets.push(s));
  await new Promise<void>((resolve) => squatter.listen(redis.port, '127.0.0.1', resolve));
  try {
    // Its own words say why, from its log: the port is taken.
    await assert.rejects(redis.restart(), /redis-server on port \d+ exited with 1: .*Address already in use/);
  } finally {
    for (const s of sockets) s.destroy();
    squatter.close();
    await redis.stop();
  }
});

test('a restart from the AOF keeps what the killed server acknowledged', async () => {
  const redis = await startRedis();
  try {
    const cli = (...args: string[]) =>
      new Promise<string>((resolve, reject) =>
        execFile('redis-cli', ['-p', String(redis.port), ...args], (err, out) =>
          err ? reject(err) : resolve(out.trim()),
        ),
      );
    await cli('SET', 'k', 'v');
    await redis.kill();
    await redis.restart();
    assert.equal(await cli('GET', 'k'), 'v');
  } finally {
    await redis.stop();
  }
});
