/**
 * An idle client connection outlives the idle timeout of the balancers that pool connections in
 * front of the api (60 s for AWS's ALB and ingress-nginx's upstream keep-alive): one the api closed
 * first, reused by the balancer at that moment, is a 502 to its client. Node.js closes one after 5 s.
 */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { DEFAULTS } from '@taskline/config';
import { useStackWithApi, type InProcessApi } from './helpers.js';

let api: InProcessApi;
useStackWithApi((_stack, a) => (api = a));

test('an idle connection stays open past Node.js default of 5 s, and says for how long', async () => {
  const socket = connect(api.running.port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  try {
    const first = await get(socket);
    assert.match(first, /^HTTP\/1\.1 200/);
    const advertised = /^keep-alive: timeout=(\d+)/im.exec(first)?.[1];
    assert.equal(Number(advertised) * 1000, Number(DEFAULTS.TASKLINE_HTTP_KEEPALIVE_MS), first);
    assert.ok(Number(DEFAULTS.TASKLINE_HTTP_KEEPALIVE_MS) > 60_000, 'longer than the common 60 s');
    await sleep(6000);
    assert.match(await get(socket), /^HTTP\/1\.1 200/, 'the same connection serves a second request');
  } finally {
    socket.destroy();
  }
});

/** One `GET /healthz` on `socket`, kept alive; its response head and body as text. */
function get(socket: Socket): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (d: Buffer) => {
      text += d.toString();
      // /healthz answers a small JSON body with a Content-Length: complete once the body is in.
      const [head, body] = text.split('\r\n\r\n');
      const length = /^content-length: (\d+)/im.exec(head ?? '')?.[1];
      if (body !== undefined && length !== undefined && Buffer.byteLength(body) >= Number(length)) done();
    };
    const stop = () => {
      socket.off('data', onData);
      socket.off('close', onClose);
    };
    const done = () => {
      stop();
      resolve(text);
    };
    const onClose = () => {
      stop();
      reject(new Error(`the api closed the connection: ${JSON.stringify(text)}`));
    };
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  });
}
