// JWT verification: settings from the environment, a public key or a JWKS, issuer, audience and `exp`.
import { createPublicKey, type KeyObject } from 'node:crypto';
import { createRemoteJWKSet, jwtVerify, type JWTVerifyGetKey } from 'jose';

/**
 * The JWT settings, as the environment names them. The public key is PEM (SPKI); literal `\n`
 * sequences are accepted so it fits in one env line. The tolerance is seconds of clock skew
 * forgiven on `exp` and `nbf`.
 */
export interface JwtSettings {
  TASKLINE_JWT_PUBLIC_KEY: string;
  TASKLINE_JWT_JWKS_URL: string;
  TASKLINE_JWT_ISSUER: string;
  TASKLINE_JWT_AUDIENCE: string;
  TASKLINE_JWT_CLOCK_TOLERANCE_S: number;
  /** The signature algorithms accepted, comma separated (asymmetric only; `loadEnv` checks). */
  TASKLINE_JWT_ALGORITHMS: string;
}

/** The verified token's claims; callers pick the claim they need (tenant, operator role). */
export type JwtVerifier = (token: string) => Promise<Record<string, unknown>>;

/**
 * A verifier for the configured key or JWKS, or null when JWTs are not configured. Every token
 * must name the configured issuer and audience and carry `exp`; a verifier without an issuer or
 * audience is refused (`loadEnv` refuses the same settings at start-up).
 */
export function jwtVerifier(env: JwtSettings): JwtVerifier | null {
  let key: KeyObject | JWTVerifyGetKey;
  if (env.TASKLINE_JWT_PUBLIC_KEY) key = createPublicKey(env.TASKLINE_JWT_PUBLIC_KEY.replace(/\\n/g, '\n'));
  else if (env.TASKLINE_JWT_JWKS_URL) key = createRemoteJWKSet(new URL(env.TASKLINE_JWT_JWKS_URL));
  else return null;
  if (!env.TASKLINE_JWT_ISSUER || !env.TASKLINE_JWT_AUDIENCE)
    throw new Error('JWT auth needs TASKLINE_JWT_ISSUER and TASKLINE_JWT_AUDIENCE');
  const options = {
    issuer: env.TASKLINE_JWT_ISSUER,
    audience: env.TASKLINE_JWT_AUDIENCE,
    requiredClaims: ['exp'],
    clockTolerance: env.TASKLINE_JWT_CLOCK_TOLERANCE_S,
    // Only the listed algorithms: a token's own `alg` header never picks how it is checked.
    algorithms: env.TASKLINE_JWT_ALGORITHMS.split(','),
  };
  return async (token) => {
    // jose overloads on the key's type; both branches accept the same options.
    const { payload } =
      typeof key === 'function' ? await jwtVerify(token, key, options) : await jwtVerify(token, key, options);
    return payload;
  };
}

/**
 * When a verified token stops being accepted (ms since the epoch): its `exp` (which every token
 * carries) plus the forgiven clock skew. A stream it opened ends then (`whenExpired`).
 */
export const jwtExpiresAt = (
  claims: Record<string, unknown>,
  env: Pick<JwtSettings, 'TASKLINE_JWT_CLOCK_TOLERANCE_S'>,
) => (Number(claims.exp) + env.TASKLINE_JWT_CLOCK_TOLERANCE_S) * 1000;

/** Three base64url segments: the compact JWS form. API keys never contain dots. */
export const looksLikeJwt = (token: string) => /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(token);
