import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { connectRedis, type TaskStore } from '@taskline/engine';
import { startRedis, until, type RedisServer } from '@taskline/testing';
import { ReplicaChannel } from '../src/legacy/channel.js';

// The package's own way to name the client type (ioredis is the engine's dependency, not this one's).
type Redis = TaskStore['redis'];

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
    assert.ok(told.includes('k2'), "told.includes('k2')");
    release();
    const heard = told.length;
    assert.equal(a.tellHere('k1'), false, 'released');
    await b.publish('k1');
    await b.publish('k2');
    await until('a hears k2 again', () => told.filter((k) => k === 'k2').length === 2 || undefined);
    assert.equal(told.length, heard + 1, 'the released k1 was not heard');
  });

  it('finds news it missed, published before its subscription stood or while it was away, by resync', async () => {
    const redis = replica('resync');
    const other = new ReplicaChannel(replica('other'), 'test:channel:two');
    // What a holder's news leaves in Redis besides the message (the relay's answer list).
    const kept = new Set<string>();
    const told: string[] = [];
    const channel = new ReplicaChannel(redis, 'test:channel:two', (keys) =>
      keys.forEach((k) => kept.has(k) && channel.tellHere(k)),
    );
    channel.hold('x', () => told.push('x'));
    // Published at once: it reaches Redis before this replica's subscription does.
    kept.add('x');
    await other.publish('x');
    await until('x is found', () => told.includes('x') || undefined);

    // Every subscriber is cut off; news comes meanwhile with no message at all.
    const cluster = redis as unknown as { nodes?(role: 'all'): Redis[] };
    const nodes = cluster.nodes ? cluster.nodes('all') : [redis];
    await Promise.all(nodes.map((n) => n.client('KILL', 'TYPE', 'pubsub')));
    channel.hold('y', () => told.push('y'));
    kept.add('y');
    await until('y is found', () => told.includes('y') || undefined);
    // And the subscription stands again.
    channel.hold('z', () => told.push('z'));
    await until('z is heard', async () => {
      await other.publish('z');
      return told.includes('z') || undefined;
    });
  });
});
