/** The control plane admits only credentialed workers, and one live process per worker id. */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import {
  controlSecurityFromEnv,
  controlService,
  startControlServer,
  type ControlClient,
  type ControlSecurity,
  type ControlSecurityEnv,
  type ControlServer,
} from '../src/index.js';
import { TEST_SECURITY, testWorker } from './worker.js';

async function until(what: string, ok: () => boolean, ms = 30_000): Promise<void> {
  for (const end = Date.now() + ms; !ok(); await sleep(20))
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
}

async function leader(t: TestContext, security: ControlSecurity = TEST_SECURITY): Promise<ControlServer> {
  const server = await startControlServer({
    address: '127.0.0.1:0',
    schedulerId: 's',
    security,
    heartbeatMs: 50,
    // No test here waits for a heartbeat to lapse (a closed stream frees its id at once): a live
    // worker stays live however long a starved host leaves this process without a turn.
    workerTimeoutMs: 30_000,
    leadership: { isLeader: () => true, leaderAddr: async () => null },
  });
  t.after(() => server.close());
  return server;
}

/** A worker that records its refusal instead of failing the test. */
function refusable(t: TestContext, address: string, options: Parameters<typeof testWorker>[2] = {}) {
  const refusals: string[] = [];
  const worker: ControlClient = testWorker([address], 1, { ...options, onRefused: (m) => refusals.push(m) });
  t.after(() => worker.close());
  return { worker, refusals };
}

const OTHER_TOKEN = 'another-token-that-is-long-enough-0123456789';

test('a worker with a token the scheduler does not accept is refused for good and counts no capacity', async (t) => {
  const server = await leader(t);
  const { refusals } = refusable(t, `127.0.0.1:${server.port}`, {
    security: { tokens: [OTHER_TOKEN], tls: null },
  });
  await until('the refusal', () => refusals.length > 0);
  assert.match(refusals[0]!, /token missing or not accepted/);
  assert.equal(server.workers().length, 0);
  assert.equal(server.capacity().size, 0);
});

test('a caller with no token at all (any pod with a gRPC client) is refused UNAUTHENTICATED', async (t) => {
  const server = await leader(t);
  const Control = controlService();
  const client = new Control(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
  t.after(() => client.close());
  const call = client.Connect();
  const status = new Promise<grpc.ServiceError>((resolve) => call.on('error', resolve));
  call.write({
    body: 'register',
    register: { worker_id: 'fake', models: [{ model: 'm', slots: 99, free: 99 }] },
  });
  assert.equal((await status).code, grpc.status.UNAUTHENTICATED);
  assert.equal(server.capacity().size, 0, 'no fake capacity');
});

test('during a rotation the scheduler accepts either token; a worker sends its first', async (t) => {
  const server = await leader(t, { tokens: [TEST_SECURITY.tokens[0]!, OTHER_TOKEN], tls: null });
  refusable(t, `127.0.0.1:${server.port}`, { workerId: 'old' });
  refusable(t, `127.0.0.1:${server.port}`, {
    workerId: 'new',
    security: { tokens: [OTHER_TOKEN], tls: null },
  });
  await until('both registered', () => server.workers().length === 2);
});

test('a second process under a live worker id is refused; the first keeps its registration', async (t) => {
  const server = await leader(t);
  const address = `127.0.0.1:${server.port}`;
  const first = refusable(t, address, { workerId: 'w-dup' });
  await until('the first registered', () => first.worker.connectedTo === address);
  const second = refusable(t, address, { workerId: 'w-dup' });
  await until('the refusal', () => second.refusals.length > 0);
  assert.match(second.refusals[0]!, /worker id w-dup is registered by a live worker/);
  await sleep(200); // heartbeats go on over the first stream
  assert.equal(first.refusals.length, 0);
  assert.equal(first.worker.connectedTo, address);
  assert.deepEqual(
    server.workers().map((w) => w.workerId),
    ['w-dup'],
  );
});

test('the id of a worker whose heartbeat lapsed may be registered again', async (t) => {
  const server = await leader(t);
  const address = `127.0.0.1:${server.port}`;
  const first = refusable(t, address, { workerId: 'w-gone' });
  await until('the first registered', () => first.worker.connectedTo === address);
  first.worker.close(); // the stream ends: the id is free at once
  const second = refusable(t, address, { workerId: 'w-gone' });
  await until('the second registered', () => second.worker.connectedTo === address);
  assert.equal(second.refusals.length, 0);
});

const tls = (name: string) => fileURLToPath(new URL(`tls/${name}`, import.meta.url));
const env = (over: Partial<ControlSecurityEnv>): ControlSecurityEnv => ({
  TASKLINE_CONTROL_TOKEN: '',
  TASKLINE_CONTROL_PLAINTEXT: false,
  TASKLINE_CONTROL_TLS_CA: '',
  TASKLINE_CONTROL_TLS_CERT: '',
  TASKLINE_CONTROL_TLS_KEY: '',
  TASKLINE_CONTROL_TLS_SERVER_NAME: '',
  ...over,
});
const schedulerTls = env({
  TASKLINE_CONTROL_TLS_CA: tls('ca.pem'),
  TASKLINE_CONTROL_TLS_CERT: tls('scheduler.pem'),
  TASKLINE_CONTROL_TLS_KEY: tls('scheduler.key'),
});
const workerTls = (cert: string) =>
  env({
    TASKLINE_CONTROL_TLS_CA: tls('ca.pem'),
    TASKLINE_CONTROL_TLS_CERT: tls(`${cert}.pem`),
    TASKLINE_CONTROL_TLS_KEY: tls(`${cert}.key`),
    TASKLINE_CONTROL_TLS_SERVER_NAME: 'taskline-scheduler',
  });

test('TLS with client certificates: a worker with the CA-signed certificate registers, another is refused', async (t) => {
  const server = await leader(t, controlSecurityFromEnv(schedulerTls, 'scheduler'));
  const address = `127.0.0.1:${server.port}`;
  const good = refusable(t, address, {
    workerId: 'w-cert',
    security: controlSecurityFromEnv(workerTls('worker'), 'worker'),
  });
  await until('the certified worker registered', () => good.worker.connectedTo === address);
  const intruder = refusable(t, address, {
    workerId: 'w-intruder',
    security: controlSecurityFromEnv(workerTls('intruder'), 'worker'),
  });
  await sleep(500); // the handshake fails over and over; never a registration
  assert.equal(intruder.worker.connectedTo, null);
  assert.deepEqual(
    server.workers().map((w) => w.workerId),
    ['w-cert'],
  );
});

test('start-up refuses a control plane open to any caller, and plaintext unless asked for', () => {
  assert.throws(() => controlSecurityFromEnv(env({}), 'scheduler'), /set TASKLINE_CONTROL_TOKEN/);
  assert.throws(() => controlSecurityFromEnv(env({}), 'worker'), /set TASKLINE_CONTROL_TOKEN/);
  const token = { TASKLINE_CONTROL_TOKEN: TEST_SECURITY.tokens[0]! };
  assert.throws(() => controlSecurityFromEnv(env(token), 'scheduler'), /TASKLINE_CONTROL_PLAINTEXT=true/);
  assert.deepEqual(controlSecurityFromEnv(env({ ...token, TASKLINE_CONTROL_PLAINTEXT: true }), 'scheduler'), {
    tokens: [token.TASKLINE_CONTROL_TOKEN],
    tls: null,
  });
  // Client certificates need TLS: plaintext with only a CA authenticates nobody.
  assert.throws(
    () => controlSecurityFromEnv({ ...schedulerTls, TASKLINE_CONTROL_PLAINTEXT: true }, 'scheduler'),
    /set TASKLINE_CONTROL_TOKEN/,
  );
  assert.throws(
    () => controlSecurityFromEnv(env({ ...token, TASKLINE_CONTROL_TLS_CERT: tls('worker.pem') }), 'worker'),
    /go together/,
  );
});
