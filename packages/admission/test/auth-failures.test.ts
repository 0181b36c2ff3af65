/** Whom a failed authentication counts against: the address as the api saw it, IPv6 by its /64. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { failureClient } from '../src/auth-failures.js';

test('IPv4 counts as itself (mapped too), IPv6 by its /64 however it is written', () => {
  assert.equal(failureClient('203.0.113.7'), '203.0.113.7');
  assert.equal(failureClient('::ffff:203.0.113.7'), '203.0.113.7');
  for (const same of ['2001:db8:7:8::1', '2001:DB8:0007:8:ab::1', '2001:db8:7:8:ffff:ffff:ffff:ffff'])
    assert.equal(failureClient(same), '2001:db8:7:8::/64', same);
  assert.equal(failureClient('2001:db8:7:9::1'), '2001:db8:7:9::/64');
  assert.equal(failureClient('::1'), '0:0:0:0::/64');
  assert.equal(failureClient('1::5:6:7:1.2.3.4'), '1:0:0:5::/64', 'a dotted tail is two groups');
  assert.equal(failureClient('fe80::1'), 'fe80:0:0:0::/64');
});
