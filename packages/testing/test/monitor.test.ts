import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { monitorArgs, monitorRedis, startRedis, until, type RedisServer } from '../src/index.js';

const run = promisify(execFile);
let redis: RedisServer;
before(async () => {
  redis = await startRedis();
});
after(() => redis.stop());

test('monitorRedis hands over every command after ready, with its arguments unescaped', async () => {
  const seen: string[][] = [];
  const monitor = monitorRedis(redis.url, (args) => seen.push(args));
  await monitor.ready;
  const odd = 'a "quoted" \\ line\nwith é and \x01';
  await run('redis-cli', ['-p', String(new URL(redis.url).port), 'SET', 'k:1', odd]);
  await run('redis-cli', ['-p', String(new URL(redis.url).port), 'DEL', 'k:1']);
  await until('the DEL seen', () => (seen.some((args) => args[0] === 'DEL') ? true : undefined), 5000);
  monitor.stop();
  const ours = seen.filter((args) => args[1] === 'k:1');
  assert.deepEqual(ours, [
    ['SET', 'k:1', odd],
    ['DEL', 'k:1'],
  ]);
});

test('monitorArgs reads a Lua line and the escapes Redis writes', () => {
  assert.deepEqual(monitorArgs('+1796039739.385164 [0 lua] "HSET" "k" "f" "a\\"b\\\\c\\x00\\n"'), [
    'HSET',
    'k',
    'f',
    'a"b\\c\x00\n',
  ]);
});
