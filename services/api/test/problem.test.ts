/**
 * The api's one error handler, in this process: a Taskline error that means "try again" (a write
 * the Redis replicas did not acknowledge in time, a cluster slot without a known primary) is no
 * fault of the api: logged and counted as the store's unavailability, as the same from Redis is,
 * never as a failed request; anything else of the api's own is an error with the request id.
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import express from 'express';
import { TasklineError, type RedisUnavailableReason } from '@taskline/engine';
import { createLogger } from '@taskline/log';
import { errorHandler } from '../src/problem.js';

const lines: Record<string, unknown>[] = [];
const counted: RedisUnavailableReason[] = [];
let base = '';
let close = () => undefined as void;

before(async () => {
  const logger = createLogger({ service: 'api-test' }, 'info', (line) => lines.push(JSON.parse(line)));
  const app = express();
  app.get('/replication', () => {
    throw new TasklineError('replication_timeout', 'The write reached 0 of 1 Redis replicas; retry shortly.');
  });
  app.get('/clusterdown', () => {
    throw new TasklineError('unavailable', 'no primary known for a key yet; retry shortly', {
      reason: 'clusterdown',
    });
  });
  app.get('/internal', () => {
    throw new TasklineError('internal_error', 'a bug');
  });
  app.use(
    errorHandler(
      logger,
      () => true,
      (reason) => counted.push(reason),
    ),
  );
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  close = () => void server.close();
});
after(() => close());

/** The log lines and counts one request left. */
async function request(path: string) {
  lines.length = 0;
  counted.length = 0;
  const res = await fetch(base + path);
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.json() };
}

for (const [path, code, reason] of [
  ['/replication', 'replication_timeout', 'replication'],
  ['/clusterdown', 'unavailable', 'clusterdown'],
] as const)
  test(`${code} (${reason}) is the store's unavailability: a warning, counted, 503 with Retry-After`, async () => {
    const res = await request(path);
    assert.equal(res.status, 503);
    assert.equal(res.retryAfter, '1');
    assert.equal((res.body as { code: string }).code, code);
    assert.deepEqual(counted, [reason]);
    assert.deepEqual(
      lines.map((l) => [l.level, l.msg, l.reason]),
      [['warn', 'task store unavailable', reason]],
    );
  });

test("an error of the api's own is logged as one, and not counted as the store's", async () => {
  const res = await request('/internal');
  assert.equal(res.status, 500);
  assert.deepEqual(counted, []);
  assert.deepEqual(
    lines.map((l) => [l.level, l.msg]),
    [['error', 'request failed']],
  );
});
