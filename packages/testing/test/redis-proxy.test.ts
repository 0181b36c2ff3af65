// startRedisProxy: what a client behind it sees of a lost reply and of an outage.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { startRedis, startRedisProxy, type RedisProxy, type RedisServer } from '../src/index.js';

const run = promisify(execFile);
let redis: RedisServer;
let proxy: RedisProxy;
before(async () => {
  redis = await startRedis();
  proxy = await startRedisProxy(redis.url);
});
after(async () => {
  await proxy.close();
  await redis.stop();
});

const cli = async (...args: string[]) =>
  (await run('redis-cli', ['-p', String(new URL(redis.url).port), ...args])).stdout.trim();

/** Sends `raw` through the proxy; resolves with what came back and how the connection ended. */
function exchange(raw: string): Promise<{ data: string; error: string | null }> {
  return new Promise((resolve) => {
    const socket = connect(proxy.port, '127.0.0.1', () => socket.write(raw));
    let data = '';
    socket.on('data', (d) => (data += d.toString()));
    socket.on('error', (err: NodeJS.ErrnoException) => resolve({ data, error: err.code ?? err.message }));
    socket.on('close', () => resolve({ data, error: null }));
  });
}

const command = (...args: string[]) =>
  `*${args.length}\r\n${args.map((a) => `$${a.length}\r\n${a}\r\n`).join('')}`;

test('loseReply: the replies before the matched command arrive, its own never does, though Redis ran it; what follows it never runs', async () => {
  const lost = proxy.loseReply((c) => c[0] === 'INCR' && c[1] === 'n');
  const { data, error } = await exchange(
    command('SET', 'a', 'x') + command('INCR', 'n') + command('SET', 'b', 'y'),
  );
  assert.deepEqual(await lost, ['INCR', 'n']);
  // Only the reply before it came back. How the connection ended (a reset, or a close when the
  // kernel sends the FIN first on a loaded host) is alike to a client: it reconnects and re-sends.
  assert.equal(data, '+OK\r\n');
  assert.ok(error === 'ECONNRESET' || error === null, String(error));
  assert.equal(await cli('GET', 'n'), '1');
  assert.equal(await cli('EXISTS', 'b'), '0');
});

test('outage: connections are reset and new ones refused until it ends, then served', async () => {
  const ended = proxy.outage(300);
  assert.equal((await exchange(command('PING'))).error, 'ECONNRESET');
  await ended;
  assert.deepEqual(await exchange(command('PING') + command('QUIT')), {
    data: '+PONG\r\n+OK\r\n',
    error: null,
  });
});
