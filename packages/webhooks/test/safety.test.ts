/**
 * What a delivery may reach: loopback, private and link-local endpoints refused without the
 * setting, both when the URL names the address and when a name resolves to it at connect time.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { checkUrl, isNonPublic, send, UnsafeTarget, type Reach, type Resolve } from '../src/index.js';

let port = 0;
let hits = 0;
const server = createServer((_req, res) => {
  hits++;
  res.end('ok');
});
before(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
after(() => new Promise<void>((resolve) => server.close(() => resolve())));

const limits = (reach: Reach) => ({ reach, timeoutMs: 2000, maxResponseBytes: 1024 });
/** A resolver that answers `address` for every name: a DNS record pointing wherever it likes. */
const resolvesTo =
  (address: string): Resolve =>
  (_host, _options, callback) =>
    callback(null, [{ address, family: address.includes(':') ? 6 : 4 }]);

test('non-public addresses are recognised, IPv4-mapped IPv6 included', () => {
  for (const a of [
    '127.0.0.1',
    '10.1.2.3',
    '172.16.0.1',
    '192.168.1.1',
    '169.254.169.254',
    '::1',
    'fe80::1',
    'fd00::1',
    '::ffff:127.0.0.1',
    '0.0.0.0',
  ])
    assert.ok(isNonPublic(a), a);
  for (const a of ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946', '::ffff:8.8.8.8'])
    assert.ok(!isNonPublic(a), a);
});

test('an endpoint URL on a loopback address or localhost is refused without the setting', () => {
  const strict = { allowHttp: true, allowPrivate: false };
  for (const url of [
    `http://127.0.0.1:${port}/`,
    'http://[::1]/',
    'http://localhost/',
    'http://169.254.169.254/',
  ])
    assert.throws(
      () => checkUrl(url, strict),
      (e: unknown) => e instanceof UnsafeTarget && e.code === 'webhook_address_refused',
      url,
    );
  assert.ok(
    checkUrl(`http://127.0.0.1:${port}/`, { allowHttp: true, allowPrivate: true }),
    'checkUrl(`http://127.0.0.1:${port}/`, { allowHttp: true, allowPrivate: true })',
  );
});

test('plain http is refused unless allowed', () => {
  assert.throws(() => checkUrl('http://example.com/', { allowHttp: false, allowPrivate: false }), /https/);
  assert.ok(
    checkUrl('https://example.com/', { allowHttp: false, allowPrivate: false }),
    "checkUrl('https://example.com/', { allowHttp: false, allowPrivate: false })",
  );
});

test('a name resolving to loopback at connect time is refused (no request reaches it) unless allowed', async () => {
  const before = hits;
  const refused = await send(
    `http://hooks.example.com:${port}/`,
    {},
    '{}',
    limits({ allowHttp: true, allowPrivate: false, resolve: resolvesTo('127.0.0.1') }),
  );
  assert.equal(refused.ok, false);
  assert.equal(refused.status, null);
  assert.match(refused.response, /webhook_address_refused/);
  assert.equal(hits, before, 'nothing connected');
  const allowed = await send(
    `http://hooks.example.com:${port}/`,
    {},
    '{}',
    limits({ allowHttp: true, allowPrivate: true, resolve: resolvesTo('127.0.0.1') }),
  );
  assert.equal(allowed.ok, true);
  assert.equal(hits, before + 1);
});

test('the response read is bounded and the attempt times out', async () => {
  const slow = createServer(() => undefined);
  await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(slow.address() as AddressInfo).port}/`;
  const started = Date.now();
  const result = await send(url, {}, '{}', {
    reach: { allowHttp: true, allowPrivate: true },
    timeoutMs: 300,
    maxResponseBytes: 10,
  });
  assert.equal(result.ok, false);
  assert.ok(Date.now() - started < 2000, 'Date.now() - started < 2000');
  slow.closeAllConnections();
  await new Promise<void>((resolve) => slow.close(() => resolve()));
});
