/** JWT verification checks the signature only with the algorithms the settings allow. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { exportSPKI, generateKeyPair, SignJWT } from 'jose';
import { loadEnv } from '@taskline/config';
import { jwtVerifier, type JwtSettings } from '../src/index.js';

const settings = (publicKey: string, algorithms: string): JwtSettings => ({
  TASKLINE_JWT_PUBLIC_KEY: publicKey,
  TASKLINE_JWT_JWKS_URL: '',
  TASKLINE_JWT_ISSUER: 'https://issuer.test',
  TASKLINE_JWT_AUDIENCE: 'taskline',
  TASKLINE_JWT_CLOCK_TOLERANCE_S: 0,
  TASKLINE_JWT_ALGORITHMS: algorithms,
});

async function signed(alg: 'RS256' | 'PS256') {
  const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
  const token = await new SignJWT({ tenant: 't' })
    .setProtectedHeader({ alg })
    .setIssuer('https://issuer.test')
    .setAudience('taskline')
    .setExpirationTime('5m')
    .sign(privateKey);
  return { token, publicKey: await exportSPKI(publicKey) };
}

test('a token signed with an algorithm off the allow-list is refused, even with the right key', async () => {
  // An RSA key verifies RS256 and PS256 alike: only the list tells them apart.
  const { token, publicKey } = await signed('PS256');
  await assert.rejects(jwtVerifier(settings(publicKey, 'RS256,ES256'))!(token), /alg/i);
  assert.equal((await jwtVerifier(settings(publicKey, 'RS256,PS256'))!(token)).tenant, 't');
});

test('the default list takes RS256; start-up refuses HS256, none and unknown names', async () => {
  const { token, publicKey } = await signed('RS256');
  const env = loadEnv({});
  assert.equal((await jwtVerifier(settings(publicKey, env.TASKLINE_JWT_ALGORITHMS))!(token)).tenant, 't');
  for (const bad of ['HS256', 'none', 'RS256,HS512', 'RS1'])
    assert.throws(() => loadEnv({ TASKLINE_JWT_ALGORITHMS: bad }), /TASKLINE_JWT_ALGORITHMS/, bad);
});
