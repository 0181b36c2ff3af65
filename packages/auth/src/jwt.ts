import { createPublicKey, type KeyObject } from 'node:crypto';
import { createRemoteJWKSet, jwtVerify, type JWTVerifyGetKey } from 'jose';

export interface JwtSettings {
  /** PEM (SPKI) public key; literal `\n` sequences are accepted so it fits in one env line. */
  publicKey: string;
  jwksUrl: string;
  issuer: string;
  audience: string;
  /** Seconds of clock skew forgiven on `exp` and `nbf`. */
  clockToleranceS: number;
}

/** The verified token's claims; callers pick the claim they need (tenant, operator role). */
export type JwtVerifier = (token: string) => Promise<Record<string, unknown>>;

/**
 * A verifier for the configured key or JWKS, or null when JWTs are not configured. Every token
 * must name the configured issuer and audience and carry `exp`; a verifier without an issuer or
 * audience is refused (`loadEnv` refuses the same settings at start-up).
 */
export function jwtVerifier(settings: JwtSettings): JwtVerifier | null {
  let key: KeyObject | JWTVerifyGetKey;
  if (settings.publicKey) key = createPublicKey(settings.publicKey.replace(/\\n/g, '\n'));
  else if (settings.jwksUrl) key = createRemoteJWKSet(new URL(settings.jwksUrl));
  else return null;
  if (!settings.issuer || !settings.audience)
    throw new Error('JWT auth needs TASKLINE_JWT_ISSUER and TASKLINE_JWT_AUDIENCE');
  const options = {
    issuer: settings.issuer,
    audience: settings.audience,
    requiredClaims: ['exp'],
    clockTolerance: settings.clockToleranceS,
  };
  return async (token) => {
    // jose overloads on the key's type; both branches accept the same options.
    const { payload } =
      typeof key === 'function' ? await jwtVerify(token, key, options) : await jwtVerify(token, key, options);
    return payload;
  };
}

/** Three base64url segments: the compact JWS form. API keys never contain dots. */
export const looksLikeJwt = (token: string) => /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(token);
