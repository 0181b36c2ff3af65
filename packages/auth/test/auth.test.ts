import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { exportSPKI, generateKeyPair, SignJWT } from 'jose';
import type { Redis } from 'ioredis';
import { connectRedis, TasklineError } from '@taskline/engine';
import { startRedis, type RedisServer } from '@taskline/testing';
import { ApiKeyStore, authenticator, whenExpired, type AuthSettings } from '../src/index.js';

let server: RedisServer;
let redis: Redis;
before(async () => {
  server = await startRedis();
  redis = connectRedis(server.url, 'auth-test');
});
after(async () => {
  redis.disconnect();
  await server.stop();
});

const settings = (over: Partial<AuthSettings> = {}): AuthSettings => ({
  TASKLINE_API_KEYS: 'static-t:static-key-1234',
  TASKLINE_JWT_PUBLIC_KEY: '',
  TASKLINE_JWT_JWKS_URL: '',
  TASKLINE_JWT_TENANT_CLAIM: 'tenant',
  TASKLINE_JWT_ISSUER: '',
  TASKLINE_JWT_AUDIENCE: '',
  TASKLINE_JWT_CLOCK_TOLERANCE_S: 30,
  TASKLINE_JWT_ALGORITHMS: 'RS256,ES256,EdDSA',
  ...over,
});

const refused = async (p: Promise<unknown>) =>
  assert.rejects(p, (err) => err instanceof TasklineError && err.code === 'unauthorized');

test('static keys, stored keys and JWTs each prove a tenant; everything else is unauthorized', async () => {
  const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
  const auth = authenticator(
    settings({
      TASKLINE_JWT_PUBLIC_KEY: await exportSPKI(publicKey),
      TASKLINE_JWT_ISSUER: 'https://idp.test',
      TASKLINE_JWT_AUDIENCE: 'taskline',
    }),
    redis,
  );
  const stored = await new ApiKeyStore(redis).create('stored-t');

  assert.deepEqual(await auth.authenticate({ authorization: 'Bearer static-key-1234' }), {
    id: 'static-t',
    via: 'static_key',
  });
  assert.deepEqual(await auth.authenticate({ authorization: `bearer ${stored.key}` }), {
    id: 'stored-t',
    via: 'api_key',
  });
  const jwt = await new SignJWT({ tenant: 'jwt-t' })
    .setProtectedHeader({ alg: 'ES256' })
    .setIssuer('https://idp.test')
    .setAudience('taskline')
    .setExpirationTime(2_000_000_000)
    .sign(privateKey);
  // Keys never expire; a JWT's tenant says when its streams end: `exp` plus the 30 s of tolerance.
  assert.deepEqual(await auth.authenticate({ authorization: `Bearer ${jwt}` }), {
    id: 'jwt-t',
    via: 'jwt',
    expiresAt: (2_000_000_000 + 30) * 1000,
  });

  const wrongAudience = await new SignJWT({ tenant: 'jwt-t' })
    .setProtectedHeader({ alg: 'ES256' })
    .setIssuer('https://idp.test')
    .setAudience('other')
    .setExpirationTime('1m')
    .sign(privateKey);
  for (const authorization of [
    undefined,
    '',
    'Bearer',
    'Basic abc',
    'Bearer not-a-key',
    `Bearer ${wrongAudience}`,
    'Bearer static-key-1234 extra',
  ]) {
    await refused(auth.authenticate(authorization === undefined ? {} : { authorization }));
  }
  await new ApiKeyStore(redis).revoke(stored.id);
  await refused(auth.authenticate({ authorization: `Bearer ${stored.key}` }));
});

test('without a configured key, JWT-shaped tokens are only looked up as API keys', async () => {
  const { privateKey } = await generateKeyPair('ES256');
  const auth = authenticator(settings(), redis);
  const jwt = await new SignJWT({ tenant: 'x' }).setProtectedHeader({ alg: 'ES256' }).sign(privateKey);
  await refused(auth.authenticate({ authorization: `Bearer ${jwt}` }));
});

test('tenant ids that could break Redis keys are refused when keys are made', async () => {
  await assert.rejects(
    new ApiKeyStore(redis).create('a{b}'),
    (err) => err instanceof TasklineError && err.code === 'invalid_request',
  );
});

describe('JWT claims', () => {
  const issuer = 'https://idp.test';
  const audience = 'taskline';
  let keys: Awaited<ReturnType<typeof generateKeyPair>>;
  let auth: ReturnType<typeof authenticator>;
  before(async () => {
    keys = await generateKeyPair('ES256', { extractable: true });
    auth = authenticator(
      settings({
        TASKLINE_JWT_PUBLIC_KEY: await exportSPKI(keys.publicKey),
        TASKLINE_JWT_ISSUER: issuer,
        TASKLINE_JWT_AUDIENCE: audience,
        TASKLINE_JWT_CLOCK_TOLERANCE_S: 30,
      }),
      redis,
    );
  });
  const now = () => Math.floor(Date.now() / 1000);
  const token = (claims: { iss?: string; aud?: string; exp?: number; nbf?: number }) => {
    const jwt = new SignJWT({ tenant: 'jwt-t' }).setProtectedHeader({ alg: 'ES256' });
    if (claims.iss !== undefined) jwt.setIssuer(claims.iss);
    if (claims.aud !== undefined) jwt.setAudience(claims.aud);
    if (claims.exp !== undefined) jwt.setExpirationTime(claims.exp);
    if (claims.nbf !== undefined) jwt.setNotBefore(claims.nbf);
    return jwt.sign(keys.privateKey);
  };
  const accepted = async (t: string) => {
    const { id, via } = await auth.authenticate({ authorization: `Bearer ${t}` });
    assert.deepEqual({ id, via }, { id: 'jwt-t', via: 'jwt' });
  };

  test('a token without exp is refused, however valid the rest', async () => {
    await refused(
      auth.authenticate({ authorization: `Bearer ${await token({ iss: issuer, aud: audience })}` }),
    );
    await accepted(await token({ iss: issuer, aud: audience, exp: now() + 60 }));
  });

  test('issuer and audience are always checked: missing or foreign ones are refused', async () => {
    for (const claims of [
      { aud: audience },
      { iss: issuer },
      { iss: 'https://evil.test', aud: audience },
      { iss: issuer, aud: 'other' },
    ]) {
      await refused(
        auth.authenticate({ authorization: `Bearer ${await token({ ...claims, exp: now() + 60 })}` }),
      );
    }
  });

  test('the clock tolerance forgives a skew within it, not beyond', async () => {
    await accepted(await token({ iss: issuer, aud: audience, exp: now() - 10 }));
    await accepted(await token({ iss: issuer, aud: audience, exp: now() + 60, nbf: now() + 10 }));
    await refused(
      auth.authenticate({
        authorization: `Bearer ${await token({ iss: issuer, aud: audience, exp: now() - 60 })}`,
      }),
    );
    await refused(
      auth.authenticate({
        authorization: `Bearer ${await token({ iss: issuer, aud: audience, exp: now() + 120, nbf: now() + 60 })}`,
      }),
    );
  });

  test('a JWT stops being accepted, and its streams end, at exp plus the clock tolerance', async () => {
    const exp = now() + 60;
    const tenant = await auth.authenticate({
      authorization: `Bearer ${await token({ iss: issuer, aud: audience, exp })}`,
    });
    assert.equal(tenant.expiresAt, (exp + 30) * 1000);
  });

  test('a verifier without issuer or audience is refused when it is built', async () => {
    const publicKey = await exportSPKI(keys.publicKey);
    for (const over of [{ TASKLINE_JWT_ISSUER: issuer }, { TASKLINE_JWT_AUDIENCE: audience }]) {
      assert.throws(
        () => authenticator(settings({ TASKLINE_JWT_PUBLIC_KEY: publicKey, ...over }), redis),
        /TASKLINE_JWT_ISSUER and TASKLINE_JWT_AUDIENCE/,
      );
    }
  });
});

describe('whenExpired', () => {
  test('calls back once the expiry has passed; never once cancelled, nor without an expiry, nor early', async () => {
    let fired = 0;
    await new Promise<void>((resolve) => whenExpired(Date.now() + 20, resolve));
    const cancel = whenExpired(Date.now() + 20, () => fired++);
    cancel();
    whenExpired(undefined, () => fired++);
    // Beyond the longest delay a timer takes (about 24.8 days), which would fire at once.
    const month = whenExpired(Date.now() + 30 * 86_400_000, () => fired++);
    // Far past the cancelled one: a timer not cleared would have fired by now.
    await new Promise((r) => setTimeout(r, 200));
    month();
    assert.equal(fired, 0);
  });
});
