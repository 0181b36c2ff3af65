/** Which Redis failures are "try again" (503 with Retry-After) rather than a fault (500). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { redisUnavailableReason } from '../src/index.js';

/** An error reply as ioredis raises it (its ReplyError, from redis-errors). */
class ReplyError extends Error {
  override name = 'ReplyError';
}

test('a command refused by a connection still in subscriber mode mid-reconnect is "try again"', () => {
  // What a Redis Cluster client's reconnecting subscriber connection answered a request during a
  // failover (chaos on a cluster): never run, so the caller may try again.
  const refused = new ReplyError(
    "ERR Can't execute 'info': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
  );
  assert.equal(redisUnavailableReason(refused), 'connection');
  // The same refusal made by ioredis itself, before sending (chaos on a cluster: a 500 on GET /events).
  const refusedHere = new Error('Connection in subscriber mode, only subscriber commands may be used');
  assert.equal(redisUnavailableReason(refusedHere), 'connection');
});

test('other error replies stay faults; the listed ones stay "try again"', () => {
  assert.equal(redisUnavailableReason(new ReplyError('ERR unknown command')), null);
  assert.equal(
    redisUnavailableReason(new ReplyError('LOADING Redis is loading the dataset in memory')),
    'loading',
  );
});
