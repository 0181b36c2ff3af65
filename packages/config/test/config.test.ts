import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, DEFAULTS, loadEnv } from '../src/index.js';

test('defaults apply when the environment is silent', () => {
  const env = loadEnv({});
  assert.equal(env.TASKLINE_PORT, Number(DEFAULTS.TASKLINE_PORT));
  assert.equal(env.TASKLINE_REQUIRE_AOF, true);
  assert.equal(env.TASKLINE_DURABILITY, 'always', 'nothing acknowledged is lost unless an operator opts out');
});

test('TASKLINE_DURABILITY takes only always or everysec', () => {
  assert.equal(loadEnv({ TASKLINE_DURABILITY: 'everysec' }).TASKLINE_DURABILITY, 'everysec');
  assert.throws(() => loadEnv({ TASKLINE_DURABILITY: 'no' }), /TASKLINE_DURABILITY/);
});

test('environment overrides defaults, empty values do not', () => {
  const env = loadEnv({ TASKLINE_PORT: '9090', TASKLINE_LOG_LEVEL: '' });
  assert.equal(env.TASKLINE_PORT, 9090);
  assert.equal(env.TASKLINE_LOG_LEVEL, 'info');
});

test('every bad value is named in one error', () => {
  assert.throws(
    () => loadEnv({ TASKLINE_PORT: 'eighty', TASKLINE_LEASE_MS: '-1' }),
    (err: unknown) =>
      err instanceof ConfigError &&
      /TASKLINE_PORT/.test(err.message) &&
      /TASKLINE_LEASE_MS/.test(err.message),
  );
});

test('TASKLINE_MAX_ATTEMPTS: 5 by default, an integer of 1 or more', () => {
  assert.equal(loadEnv({}).TASKLINE_MAX_ATTEMPTS, 5);
  assert.equal(loadEnv({ TASKLINE_MAX_ATTEMPTS: '1' }).TASKLINE_MAX_ATTEMPTS, 1);
  for (const bad of ['0', '-2', '2.5', 'many'])
    assert.throws(() => loadEnv({ TASKLINE_MAX_ATTEMPTS: bad }), /TASKLINE_MAX_ATTEMPTS/, bad);
});

test('event history may not outlive its task', () => {
  assert.throws(
    () => loadEnv({ TASKLINE_TASK_RETENTION_S: '60', TASKLINE_EVENT_RETENTION_S: '120' }),
    ConfigError,
  );
});

test("a Redis command may not time out before a create's WAIT for replicas can end", () => {
  assert.throws(
    () => loadEnv({ TASKLINE_REDIS_COMMAND_TIMEOUT_MS: '1000', TASKLINE_REPLICA_ACK_TIMEOUT_MS: '1000' }),
    (err: Error) => err instanceof ConfigError && /TASKLINE_REDIS_COMMAND_TIMEOUT_MS/.test(err.message),
  );
  assert.equal(
    loadEnv({ TASKLINE_REDIS_COMMAND_TIMEOUT_MS: '1001' }).TASKLINE_REDIS_COMMAND_TIMEOUT_MS,
    1001,
  );
});

test('JWT auth needs its issuer and audience: start-up refuses a key or JWKS URL without them', () => {
  const key = '-----BEGIN PUBLIC KEY-----\\nMFkw\\n-----END PUBLIC KEY-----';
  for (const jwt of [{ TASKLINE_JWT_PUBLIC_KEY: key }, { TASKLINE_JWT_JWKS_URL: 'https://idp.test/jwks' }]) {
    for (const missing of [
      {},
      { TASKLINE_JWT_ISSUER: 'https://idp.test' },
      { TASKLINE_JWT_AUDIENCE: 'taskline' },
    ]) {
      assert.throws(
        () => loadEnv({ ...jwt, ...missing }),
        (err: unknown) =>
          err instanceof ConfigError &&
          /TASKLINE_JWT_ISSUER/.test(err.message) &&
          /TASKLINE_JWT_AUDIENCE/.test(err.message),
      );
    }
    const env = loadEnv({
      ...jwt,
      TASKLINE_JWT_ISSUER: 'https://idp.test',
      TASKLINE_JWT_AUDIENCE: 'taskline',
    });
    assert.equal(env.TASKLINE_JWT_CLOCK_TOLERANCE_S, 30);
  }
  // Without JWT auth, neither is needed.
  assert.equal(loadEnv({}).TASKLINE_JWT_ISSUER, '');
});

test('Redis is one URL or a cluster: seed nodes as host:port, or a redis-cluster:// URL', () => {
  const cluster = loadEnv({
    TASKLINE_REDIS_CLUSTER_NODES: 'a.example:6379,10.0.0.2:7000',
    TASKLINE_REDIS_TLS: 'true',
  });
  assert.equal(cluster.TASKLINE_REDIS_CLUSTER_NODES, 'a.example:6379,10.0.0.2:7000');
  assert.equal(cluster.TASKLINE_REDIS_TLS, true);
  assert.equal(
    loadEnv({ REDIS_URL: 'rediss-cluster://u:p@h:6379' }).REDIS_URL,
    'rediss-cluster://u:p@h:6379',
  );
  assert.throws(() => loadEnv({ TASKLINE_REDIS_CLUSTER_NODES: 'a.example' }), /TASKLINE_REDIS_CLUSTER_NODES/);
  assert.throws(() => loadEnv({ REDIS_URL: 'http://h:6379' }), /REDIS_URL/);
});

test('the advertised control address is host:port (an IPv6 host bracketed or not), or empty', () => {
  assert.equal(
    loadEnv({ TASKLINE_CONTROL_ADVERTISE: 'fd00::5:7070' }).TASKLINE_CONTROL_ADVERTISE,
    'fd00::5:7070',
  );
  assert.equal(
    loadEnv({ TASKLINE_CONTROL_ADVERTISE: '[fd00::5]:7070' }).TASKLINE_CONTROL_ADVERTISE,
    '[fd00::5]:7070',
  );
  for (const bad of ['scheduler', '10.0.0.5:', 'a:1,b:2'])
    assert.throws(() => loadEnv({ TASKLINE_CONTROL_ADVERTISE: bad }), /TASKLINE_CONTROL_ADVERTISE/);
});

test('TASKLINE_TRUST_PROXY: false by default, else true, hops, or addresses, CIDRs and range names', () => {
  assert.equal(loadEnv({}).TASKLINE_TRUST_PROXY, false);
  assert.equal(loadEnv({ TASKLINE_TRUST_PROXY: 'true' }).TASKLINE_TRUST_PROXY, true);
  assert.equal(loadEnv({ TASKLINE_TRUST_PROXY: '2' }).TASKLINE_TRUST_PROXY, 2);
  assert.deepEqual(loadEnv({ TASKLINE_TRUST_PROXY: 'loopback, 10.0.0.0/8,fd00::/8' }).TASKLINE_TRUST_PROXY, [
    'loopback',
    '10.0.0.0/8',
    'fd00::/8',
  ]);
  for (const bad of ['yes', '10.0.0.0/33', 'proxy.internal', '10.0.0.1/8/1'])
    assert.throws(() => loadEnv({ TASKLINE_TRUST_PROXY: bad }), /TASKLINE_TRUST_PROXY/, bad);
});

test('TASKLINE_PREFILL_CHUNK_TOKENS: 512 positions per prefill run by default, an integer of at least 1', () => {
  assert.equal(loadEnv({}).TASKLINE_PREFILL_CHUNK_TOKENS, 512);
  assert.equal(loadEnv({ TASKLINE_PREFILL_CHUNK_TOKENS: '1' }).TASKLINE_PREFILL_CHUNK_TOKENS, 1);
  for (const bad of ['0', '-4', '2.5', 'many'])
    assert.throws(
      () => loadEnv({ TASKLINE_PREFILL_CHUNK_TOKENS: bad }),
      /TASKLINE_PREFILL_CHUNK_TOKENS/,
      bad,
    );
});

test('TASKLINE_TENANT_WEIGHTS: a weight of 0 is refused, it would never dispatch that tenant', () => {
  assert.equal(loadEnv({ TASKLINE_TENANT_WEIGHTS: 'a:1,b:3' }).TASKLINE_TENANT_WEIGHTS, 'a:1,b:3');
  for (const bad of ['a:0', 'a:2,b:0', 'a:00'])
    assert.throws(
      () => loadEnv({ TASKLINE_TENANT_WEIGHTS: bad }),
      (err: unknown) => err instanceof ConfigError && /TASKLINE_TENANT_WEIGHTS.*1 or more/.test(err.message),
      bad,
    );
});

test('renamed settings: the new name is read, the old one is still taken as its deprecated alias', () => {
  const defaults = loadEnv({});
  assert.equal(defaults.TASKLINE_MAX_UNFINISHED_TASKS, Number(DEFAULTS.TASKLINE_MAX_UNFINISHED_TASKS));
  assert.equal(defaults.TASKLINE_INDEX_SWEEP_MS, Number(DEFAULTS.TASKLINE_INDEX_SWEEP_MS));
  assert.equal(loadEnv({ TASKLINE_MAX_UNFINISHED_TASKS: '7' }).TASKLINE_MAX_UNFINISHED_TASKS, 7);
  assert.equal(loadEnv({ TASKLINE_MAX_ACTIVE_TASKS: '7' }).TASKLINE_MAX_UNFINISHED_TASKS, 7);
  assert.equal(loadEnv({ TASKLINE_RETENTION_SWEEP_MS: '500' }).TASKLINE_INDEX_SWEEP_MS, 500);
  // Both given: the new name wins, so a deployment moving over can set it beside the old one.
  const both = loadEnv({ TASKLINE_MAX_ACTIVE_TASKS: '7', TASKLINE_MAX_UNFINISHED_TASKS: '9' });
  assert.equal(both.TASKLINE_MAX_UNFINISHED_TASKS, 9);
  // An alias is validated as its new name: the error names the variable that was set.
  assert.throws(() => loadEnv({ TASKLINE_MAX_ACTIVE_TASKS: '0' }), /TASKLINE_MAX_ACTIVE_TASKS/);
  assert.ok(!('TASKLINE_MAX_ACTIVE_TASKS' in DEFAULTS), 'an alias has no default of its own');
});
