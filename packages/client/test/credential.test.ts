import assert from 'node:assert/strict';
import { test } from 'node:test';
import { credentialId, tokenHashId } from '../src/index.js';

/** A JWT's shape; the signature is never checked by the client, so any bytes do. */
const jwt = (claims: Record<string, unknown>) =>
  [{ alg: 'RS256' }, claims].map((p) => Buffer.from(JSON.stringify(p)).toString('base64url')).join('.') +
  '.c2ln';

test('a JWT stands for its issuer, subject and tenant claim, never for the token or its times', () => {
  const base = { iss: 'https://idp', sub: 'alice', tenant: 'acme', iat: 1, exp: 2, jti: 'a' };
  const id = credentialId(jwt(base));
  assert.match(id, /^jwt:sha256:[0-9a-f]{32}$/);
  assert.equal(credentialId(jwt({ ...base, iat: 5, exp: 9, jti: 'b', scope: 'x' })), id, 'a renewed token');
  for (const other of [{ sub: 'bob' }, { iss: 'https://other' }, { tenant: 'globex' }])
    assert.notEqual(credentialId(jwt({ ...base, ...other })), id, JSON.stringify(other));
  // A server reading the tenant from another claim: the client is told which.
  const org = { ...base, tenant: undefined, org: 'one' };
  assert.notEqual(credentialId(jwt(org), 'org'), credentialId(jwt({ ...org, org: 'two' }), 'org'));
  assert.ok(!id.includes('alice') && !id.includes('acme'), "!id.includes('alice') && !id.includes('acme')");
});

test('API keys, and JWTs without iss and sub, stand for a hash of the token', () => {
  assert.equal(credentialId('key-0123456789'), tokenHashId('key-0123456789'));
  const anonymous = jwt({ tenant: 'acme', exp: 2 });
  assert.equal(credentialId(anonymous), tokenHashId(anonymous));
  assert.equal(credentialId('a.b.c'), tokenHashId('a.b.c'));
  assert.equal(credentialId(undefined), '');
  assert.match(tokenHashId('key-0123456789'), /^sha256:[0-9a-f]{32}$/);
});
