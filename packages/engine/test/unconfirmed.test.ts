/**
 * Which failed writes may have been applied all the same (a create's answer then names its task,
 * docs/lmsp.md "A create answered 503"), and which Redis refused, so nothing was written.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startRedis, type RedisServer } from '@taskline/testing';
import { connectRedis, markUnconfirmedCreate, unconfirmedCreate } from '../src/index.js';

let server: RedisServer;
before(async () => (server = await startRedis()));
after(() => server.stop());

test('a write past the command timeout may have been applied: the create is marked with its id', async () => {
  const redis = connectRedis(server.url, 'unconfirmed', { commandTimeout: 200 });
  redis.on('error', () => undefined);
  server.pause();
  let err: unknown;
  try {
    err = await redis.set('k', 'v').then(
      () => assert.fail('a stopped Redis answered'),
      (e: unknown) => e,
    );
  } finally {
    server.resume();
  }
  assert.match(String(err), /Command timed out/);
  assert.equal(markUnconfirmedCreate(err, 'task_1'), true);
  assert.equal(unconfirmedCreate(err), 'task_1');
  redis.disconnect();
});

test('a write Redis refused (OOM) wrote nothing: no task to name', async () => {
  const redis = connectRedis(server.url, 'refused');
  await redis.config('SET', 'maxmemory', '1');
  try {
    const err = await redis.set('k2', 'v').then(
      () => assert.fail('the write was accepted'),
      (e: unknown) => e,
    );
    assert.match(String(err), /OOM/);
    assert.equal(markUnconfirmedCreate(err, 'task_2'), false);
    assert.equal(unconfirmedCreate(err), undefined);
  } finally {
    await redis.config('SET', 'maxmemory', '0');
    redis.disconnect();
  }
});
