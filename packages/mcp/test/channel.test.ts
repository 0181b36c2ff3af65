import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { connectRedis } from '@taskline/engine';
import { startRedis, until, type RedisServer } from '@taskline/testing';
import { ReplicaChannel } from '../src/legacy/channel.js';

describe('ReplicaChannel: one subscription per replica for the requests it holds', () => {
  let server: RedisServer;
  const connections: Redis[] = [];
  const replica = (name: string) => {
    const redis = connectRedis(server.url, name);
    redis.on('error', () => undefined);
    connections.push(redis);
    return redis;
  };

  before(async () => {
    server = await startRedis();
  });
  after(async () => {
    for (const redis of connections) redis.disconnect();
    await server.stop();
  });

  it('calls the holder of a key on whichever replica holds it, once held and never after release', async () => {
    const a = new ReplicaChannel(replica('a'), 'test:channel:one');
    const b = new ReplicaChannel(replica('b'), 'test:channel:one');
    const told: string[] = [];
    const release = a.hold('k1', () => told.push('k1'));
    a.hold('k2', () => told.push('k2'));
    assert.equal(b.tellHere('k1'), false, 'b holds nothing');
    // The subscription is made behind the first hold: publish until it stands.
    await until('a hears k1', async () => {
      await b.publish('k1');
      return told.includes('k1') || undefined;
    });
    assert.equal(a.tellHere('k2'), true);
    assert.ok(told.includes('k2'));
    release();
    const heard = told.length;
    assert.equal(a.tellHere('k1'), false, 'released');
    await b.publish('k1');
    await b.publish('k2');
    await until('a hears k2 again', () => told.filter((k) => k === 'k2').length === 2 || undefined);
    assert.equal(told.length, heard + 1, 'the released k1 was not heard');
  });

  it('hands every held key to resync once its subscription stands again after a lost connection', async () => {
    const redis = replica('resync');
    const resynced: string[][] = [];
    const channel = new ReplicaChannel(redis, 'test:channel:two', (keys) => resynced.push(keys));
    channel.hold('x', () => undefined);
    channel.hold('y', () => undefined);
    await until('the first subscription resyncs', () => resynced.length === 1 || undefined);
    assert.deepEqual(resynced[0], ['x', 'y']);
    // The subscriber's connection is dropped; it reconnects and subscribes on its own.
    await redis.client('KILL', 'TYPE', 'pubsub');
    await until('the resubscription resyncs', () => resynced.length === 2 || undefined);
    assert.deepEqual(resynced[1], ['x', 'y']);
    const subscribers = (await redis.pubsub('NUMSUB', 'test:channel:two')) as [string, number];
    assert.equal(subscribers[1], 1, 'subscribed again, once');
  });
});
