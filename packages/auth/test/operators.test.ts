import assert from 'node:assert/strict';
import { test } from 'node:test';
import { exportSPKI, generateKeyPair, SignJWT } from 'jose';
import { TasklineError } from '@taskline/engine';
import { hashKey, operatorAuthenticator, type OperatorAuthSettings } from '../src/index.js';

const settings = (over: Partial<OperatorAuthSettings> = {}): OperatorAuthSettings => ({
  TASKLINE_ADMIN_KEYS: `plain-admin-key-0123,sha256:${hashKey('hashed-admin-key-0123')}`,
  TASKLINE_JWT_ADMIN_ROLE: '',
  TASKLINE_JWT_ROLE_CLAIM: 'role',
  TASKLINE_JWT_PUBLIC_KEY: '',
  TASKLINE_JWT_JWKS_URL: '',
  TASKLINE_JWT_ISSUER: 'https://issuer.test',
  TASKLINE_JWT_AUDIENCE: 'taskline',
  TASKLINE_JWT_CLOCK_TOLERANCE_S: 0,
  TASKLINE_JWT_ALGORITHMS: 'RS256,ES256,EdDSA',
  ...over,
});

const TENANT_KEY = 'tenant-key-0123456789';
/** The tenant authenticator as the api's: one static key; anything else is no credential. */
const tenants = {
  authenticate: async (headers: { authorization?: string }) => {
    if (headers.authorization === `Bearer ${TENANT_KEY}`)
      return { id: 'tenant-a', via: 'static_key' as const };
    throw new TasklineError('unauthorized', 'The bearer token is invalid or expired.');
  },
};

const refused = (code: 'unauthorized' | 'forbidden') => (err: unknown) =>
  err instanceof TasklineError && err.code === code;

test('operator keys are compared by hash, given plain or as sha256:<hex>', async () => {
  const ops = operatorAuthenticator(settings(), tenants);
  const plain = await ops.authenticate({ authorization: 'Bearer plain-admin-key-0123' });
  assert.deepEqual(plain, { id: `key:${hashKey('plain-admin-key-0123').slice(0, 12)}`, via: 'admin_key' });
  const hashed = await ops.authenticate({ authorization: 'Bearer hashed-admin-key-0123' });
  assert.equal(hashed.via, 'admin_key');
  // The hash itself is not a key, nor any other credential.
  await assert.rejects(
    ops.authenticate({ authorization: `Bearer ${hashKey('hashed-admin-key-0123')}` }),
    refused('unauthorized'),
  );
  await assert.rejects(ops.authenticate({}), refused('unauthorized'));
  await assert.rejects(ops.authenticate({ authorization: 'Basic abc' }), refused('unauthorized'));
});

test('a token that is no credential is unauthorized (401); a valid tenant key is forbidden (403)', async () => {
  const ops = operatorAuthenticator(settings(), tenants);
  await assert.rejects(ops.authenticate({ authorization: 'Bearer garbage-token' }), refused('unauthorized'));
  await assert.rejects(ops.authenticate({ authorization: `Bearer ${TENANT_KEY}` }), refused('forbidden'));
  // A failure to tell (the key store unreachable) is not passed off as either.
  const down = operatorAuthenticator(settings(), {
    authenticate: () => Promise.reject(new Error('connection lost')),
  });
  await assert.rejects(down.authenticate({ authorization: 'Bearer garbage-token' }), /connection lost/);
});

test('a JWT is an operator only with the admin role; a tenant token is forbidden', async () => {
  const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
  const ops = operatorAuthenticator(
    settings({ TASKLINE_JWT_PUBLIC_KEY: await exportSPKI(publicKey), TASKLINE_JWT_ADMIN_ROLE: 'operator' }),
    tenants,
  );
  const sign = (claims: Record<string, unknown>) =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256' })
      .setSubject('alice')
      .setIssuer('https://issuer.test')
      .setAudience('taskline')
      .setExpirationTime('1m')
      .sign(privateKey);
  const alice = await ops.authenticate({ authorization: `Bearer ${await sign({ role: 'operator' })}` });
  assert.deepEqual({ id: alice.id, via: alice.via }, { id: 'jwt:alice', via: 'jwt' });
  // When the token stops being accepted: its console streams end then.
  assert.ok(
    alice.expiresAt! > Date.now() && alice.expiresAt! <= Date.now() + 60_000,
    'alice.expiresAt! > Date.now() && alice.expiresAt! <= Date.now() + 60_000',
  );
  assert.equal(
    (await ops.authenticate({ authorization: `Bearer ${await sign({ role: ['x', 'operator'] })}` })).via,
    'jwt',
  );
  await assert.rejects(
    ops.authenticate({ authorization: `Bearer ${await sign({ tenant: 'acme' })}` }),
    refused('forbidden'),
  );
  const other = await generateKeyPair('ES256');
  const forged = await new SignJWT({ role: 'operator' })
    .setProtectedHeader({ alg: 'ES256' })
    .sign(other.privateKey);
  await assert.rejects(ops.authenticate({ authorization: `Bearer ${forged}` }), refused('unauthorized'));
  // Without a configured role no JWT is an operator's, whatever it claims; a forged one is still no credential.
  const noRole = operatorAuthenticator(
    settings({ TASKLINE_JWT_PUBLIC_KEY: await exportSPKI(publicKey) }),
    tenants,
  );
  await assert.rejects(
    noRole.authenticate({ authorization: `Bearer ${await sign({ role: 'operator' })}` }),
    refused('forbidden'),
  );
  await assert.rejects(noRole.authenticate({ authorization: `Bearer ${forged}` }), refused('unauthorized'));
});

test("an operator JWT without a subject is refused: its actions could not be told apart from another's", async () => {
  const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
  const ops = operatorAuthenticator(
    settings({ TASKLINE_JWT_PUBLIC_KEY: await exportSPKI(publicKey), TASKLINE_JWT_ADMIN_ROLE: 'operator' }),
    tenants,
  );
  const sign = (sub: string | null) => {
    const jwt = new SignJWT({ role: 'operator' })
      .setProtectedHeader({ alg: 'ES256' })
      .setIssuer('https://issuer.test')
      .setAudience('taskline')
      .setExpirationTime('1m');
    return (sub === null ? jwt : jwt.setSubject(sub)).sign(privateKey);
  };
  for (const sub of [null, ''])
    await assert.rejects(
      ops.authenticate({ authorization: `Bearer ${await sign(sub)}` }),
      refused('unauthorized'),
      String(sub),
    );
  assert.equal((await ops.authenticate({ authorization: `Bearer ${await sign('bob')}` })).id, 'jwt:bob');
});

test("operator subjects are kept whole up to OpenID Connect's 255 characters; a longer one is refused", async () => {
  const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
  const ops = operatorAuthenticator(
    settings({ TASKLINE_JWT_PUBLIC_KEY: await exportSPKI(publicKey), TASKLINE_JWT_ADMIN_ROLE: 'operator' }),
    tenants,
  );
  const bearer = async (sub: string) => ({
    authorization: `Bearer ${await new SignJWT({ role: 'operator' })
      .setProtectedHeader({ alg: 'ES256' })
      .setIssuer('https://issuer.test')
      .setAudience('taskline')
      .setExpirationTime('1m')
      .setSubject(sub)
      .sign(privateKey)}`,
  });
  // Two operators whose subjects share their first 64 characters are still two operators.
  const shared = `${'x'.repeat(64)}@idp.example`;
  const [alice, bob] = [`alice.${shared}`, `bob.${shared}`].map((s) => s.padStart(255, 'o'));
  assert.equal((await ops.authenticate(await bearer(alice!))).id, `jwt:${alice}`);
  assert.equal((await ops.authenticate(await bearer(bob!))).id, `jwt:${bob}`);
  await assert.rejects(ops.authenticate(await bearer('o'.repeat(256))), (err: unknown) => {
    assert.ok(
      err instanceof TasklineError && err.code === 'unauthorized',
      "err instanceof TasklineError && err.code === 'unauthorized'",
    );
    assert.match(err.message, /255 characters/);
    return true;
  });
});
