/**
 * IPv6 control addresses. On an IPv6-only cluster a scheduler advertises `$(POD_IP):port`, an
 * unbracketed literal such as `fd00::5:7070`, which gRPC reads as a host with no port (RFC 3986
 * section 3.2.2 brackets an IPv6 host); the last `:port` is the port.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { ipv6Loopback } from '@taskline/testing';
import { normaliseControlAddress, startControlServer } from '../src/index.js';
import { TEST_SECURITY, testWorker } from './worker.js';

// Before any test is declared: the runner starts the first one while a later await is pending.
const noIPv6 = !(await ipv6Loopback()) && 'this host has no IPv6 loopback';

test('an unbracketed IPv6 host is bracketed; names, IPv4 and bracketed hosts are kept', () => {
  assert.equal(normaliseControlAddress('fd00::5:7070'), '[fd00::5]:7070');
  assert.equal(normaliseControlAddress(':::7070'), '[::]:7070');
  assert.equal(normaliseControlAddress('[fd00::5]:7070'), '[fd00::5]:7070');
  assert.equal(normaliseControlAddress('10.0.0.5:7070'), '10.0.0.5:7070');
  assert.equal(normaliseControlAddress('taskline-scheduler:7070'), 'taskline-scheduler:7070');
});

test(
  'a worker follows a redirect to a leader advertised as an unbracketed IPv6 address',
  { skip: noIPv6 },
  async (t) => {
    const leaderAddr = { value: '' };
    const leadership = (leads: boolean) => ({
      isLeader: () => leads,
      leaderAddr: async () => leaderAddr.value,
    });
    const options = { heartbeatMs: 50, workerTimeoutMs: 1000, security: TEST_SECURITY };
    const standby = await startControlServer({
      ...options,
      address: '127.0.0.1:0',
      schedulerId: 's',
      leadership: leadership(false),
    });
    // Bound as the chart's scheduler would be on an IPv6-only pod: host and port joined unbracketed.
    const leader = await startControlServer({
      ...options,
      address: '::1:0',
      schedulerId: 'l',
      leadership: leadership(true),
    });
    leaderAddr.value = `::1:${leader.port}`;
    const worker = testWorker([`127.0.0.1:${standby.port}`]);
    t.after(async () => {
      worker.close();
      await Promise.all([standby.close(), leader.close()]);
    });
    for (const end = Date.now() + 30_000; worker.connectedTo === null; await sleep(20))
      if (Date.now() > end) throw new Error('the worker never reached the leader');
    assert.equal(worker.connectedTo, `[::1]:${leader.port}`);
    assert.equal(leader.workers().length, 1);
  },
);
