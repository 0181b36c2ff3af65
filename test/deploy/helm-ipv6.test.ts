import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, createServer, type AddressInfo } from 'node:net';
import { ipv6Loopback } from '@taskline/testing';
import { render } from './helm-tool.js';
import { configMap, env, pod } from './manifests.js';

// On an IPv6-only cluster the kubelet's probes and every Service reach a pod at its IPv6 address;
// on an IPv4 one at its IPv4 address. Each listen address the chart sets must accept both.

const reaches = (host: string, port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect({ host, port }, () => (socket.destroy(), resolve(true)));
    socket.on('error', () => resolve(false));
  });

const noIPv6 = !(await ipv6Loopback()) && 'this host has no IPv6 loopback';

test(
  'the api, metrics and control listeners the chart sets accept IPv6 and IPv4 connections',
  { skip: noIPv6 },
  async () => {
    const ms = render();
    const scheduler = pod(ms, 'Deployment', 'taskline-scheduler').containers[0]!;
    const hosts = {
      TASKLINE_HOST: configMap(ms).TASKLINE_HOST!,
      TASKLINE_CONTROL_HOST: env(scheduler, 'TASKLINE_CONTROL_HOST')!.value!,
    };
    for (const [name, host] of Object.entries(hosts)) {
      // As the services listen: node's server.listen(port, host) (grpc-js does the same for gRPC).
      const server = createServer((s) => s.destroy());
      await new Promise<void>((resolve) => server.listen(0, host, resolve));
      const { port } = server.address() as AddressInfo;
      try {
        assert.ok(await reaches('::1', port), `${name}=${host} refuses IPv6`);
        assert.ok(await reaches('127.0.0.1', port), `${name}=${host} refuses IPv4`);
      } finally {
        server.close();
      }
    }
  },
);

test('listenHost sets every listen address, for nodes whose kernel has no IPv6', () => {
  const ms = render({ set: { listenHost: '0.0.0.0' } });
  assert.equal(configMap(ms).TASKLINE_HOST, '0.0.0.0');
  const scheduler = pod(ms, 'Deployment', 'taskline-scheduler').containers[0]!;
  assert.equal(env(scheduler, 'TASKLINE_CONTROL_HOST')?.value, '0.0.0.0');
  assert.throws(() => render({ set: { listenHost: '' } }), /schema|specifications/);
});
