import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { exportSPKI, generateKeyPair, SignJWT } from 'jose';
import type { Redis } from 'ioredis';
import { connectRedis, TasklineError } from '@taskline/engine';
import { startRedis, type RedisServer } from '@taskline/testing';
import { ApiKeyStore, authenticator, type AuthSettings } from '../src/index.js';

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
  ...over,
});

const refused = async (p: Promise<unknown>) =>
  assert.rejects(
    p,
    (err) => err instanceof TasklineError && err.code === 'unauthorized' && err.status === 401,
  );

test('static keys, stored keys and JWTs each prove a tenant; everything else is unauthorized', async () => {
  const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
  const auth = authenticator(
    settings({ TASKLINE_JWT_PUBLIC_KEY: await exportSPKI(publicKey), TASKLINE_JWT_AUDIENCE: 'taskline' }),
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
    .setAudience('taskline')
    .setExpirationTime('1m')
    .sign(privateKey);
  assert.deepEqual(await auth.authenticate({ authorization: `Bearer ${jwt}` }), { id: 'jwt-t', via: 'jwt' });

  const wrongAudience = await new SignJWT({ tenant: 'jwt-t' })
    .setProtectedHeader({ alg: 'ES256' })
    .setAudience('other')
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
