// The benchmark client's JSON calls over its keep-alive pool.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import { agent, callJson } from '../src/http.js';

after(() => agent.destroy());

test('a call whose reused keep-alive connection the server closes unanswered is sent again on another', async () => {
  // The server drops the second request on the first request's connection without a reply, as a
  // server closing an idle connection while the client reuses it does (the client reads ECONNRESET).
  let requests = 0;
  const server = createServer((req, res) => {
    requests++;
    if (requests === 2) {
      req.socket.destroy();
      return;
    }
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify({ n: requests }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    assert.deepEqual((await callJson(base, 'GET', '/a')).body, { n: 1 });
    assert.deepEqual((await callJson(base, 'GET', '/b')).body, { n: 3 });
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});
