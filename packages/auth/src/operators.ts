// Operators of the console: admin keys and JWTs with the admin role, never a tenant.
import type { IncomingHttpHeaders } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import type { Env } from '@taskline/config';
import { TasklineError } from '@taskline/engine/core';
import { unguarded, type AuthGuard } from './guard.js';
import { hashKey } from './keys.js';
import { jwtExpiresAt, jwtVerifier, looksLikeJwt } from './jwt.js';

/** Who is operating the console: never a tenant, and never scoped to one. */
export interface Operator {
  /** `key:<first 12 hex of the key's SHA-256>` or `jwt:<sub>`: what the task events record. */
  id: string;
  via: 'admin_key' | 'jwt';
  /** A JWT's: when it stops being accepted (ms since the epoch); the console streams it opens end then. */
  expiresAt?: number;
}

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** Set by the operator middleware on every console and admin request it lets through. */
      operator?: Operator;
    }
  }
}

/** OpenID Connect Core 1.0 section 2: a `sub` "MUST NOT exceed 255 ASCII characters in length". */
const MAX_SUBJECT = 255;

export type OperatorAuthSettings = Pick<
  Env,
  | 'TASKLINE_ADMIN_KEYS'
  | 'TASKLINE_JWT_ADMIN_ROLE'
  | 'TASKLINE_JWT_ROLE_CLAIM'
  | 'TASKLINE_JWT_PUBLIC_KEY'
  | 'TASKLINE_JWT_JWKS_URL'
  | 'TASKLINE_JWT_ISSUER'
  | 'TASKLINE_JWT_AUDIENCE'
  | 'TASKLINE_JWT_CLOCK_TOLERANCE_S'
  | 'TASKLINE_JWT_ALGORITHMS'
>;

export interface OperatorAuthenticator {
  /** The operator a request's headers prove; throws `unauthorized` (no operator credential) or `forbidden`. */
  authenticate(headers: IncomingHttpHeaders): Promise<Operator>;
  /** Express middleware: sets `req.operator`, or passes the refusal to the error handler. */
  middleware: (req: Request, res: Response, next: NextFunction) => void;
  /** Whether any operator credential is configured at all. */
  readonly configured: boolean;
}

/**
 * Operator authentication, apart from tenants': an operator key from `TASKLINE_ADMIN_KEYS`,
 * compared by its SHA-256 as tenant API keys are (the env may hold `sha256:<hex>` instead of the
 * key), or a JWT whose role claim names `TASKLINE_JWT_ADMIN_ROLE`. A tenant's credential is
 * never an operator's: `tenants` (the api's tenant authenticator) is asked only to tell a valid
 * tenant credential (`forbidden`, 403) from a token that is no credential at all (`unauthorized`,
 * 401, which asks the client to authenticate); a JWT that verifies without the role is `forbidden`
 * however valid it is for its tenant.
 */
export function operatorAuthenticator(
  env: OperatorAuthSettings,
  tenants: { authenticate(headers: IncomingHttpHeaders): Promise<unknown> },
  guard: AuthGuard = unguarded,
): OperatorAuthenticator {
  const hashes = new Set(
    env.TASKLINE_ADMIN_KEYS.split(',')
      .filter(Boolean)
      .map((k) => (k.startsWith('sha256:') ? k.slice('sha256:'.length) : hashKey(k))),
  );
  const role = env.TASKLINE_JWT_ADMIN_ROLE;
  // Built whenever JWTs are configured, role or not: a forged token is 401, a verified one without the role 403.
  const verify = jwtVerifier(env);

  async function authenticate(headers: IncomingHttpHeaders): Promise<Operator> {
    const header = headers.authorization;
    if (!header) throw new TasklineError('unauthorized', 'This request needs an operator credential.');
    const match = /^Bearer +([\x21-\x7e]+) *$/i.exec(header);
    if (!match) throw new TasklineError('unauthorized', 'The Authorization header must be "Bearer <token>".');
    const token = match[1]!;
    const hash = hashKey(token);
    if (hashes.has(hash)) return { id: `key:${hash.slice(0, 12)}`, via: 'admin_key' };
    if (verify && looksLikeJwt(token)) {
      let claims: Record<string, unknown>;
      try {
        claims = await verify(token);
      } catch {
        throw new TasklineError('unauthorized', 'The bearer token is invalid or expired.');
      }
      const roles = claims[env.TASKLINE_JWT_ROLE_CLAIM];
      const has = role !== '' && (Array.isArray(roles) ? roles.includes(role) : roles === role);
      if (!has) throw new TasklineError('forbidden', 'This token does not carry the operator role.');
      // The subject is who the task events and logs record as acting: a token naming none is refused.
      if (typeof claims.sub !== 'string' || claims.sub === '')
        throw new TasklineError('unauthorized', 'An operator token must name its operator (`sub`).');
      // Kept whole, never cut: two subjects alike in their first characters are two operators.
      if (claims.sub.length > MAX_SUBJECT)
        throw new TasklineError(
          'unauthorized',
          `An operator token's subject (\`sub\`) may be at most ${MAX_SUBJECT} characters (OpenID Connect Core 1.0 section 2).`,
        );
      return { id: `jwt:${claims.sub}`, via: 'jwt', expiresAt: jwtExpiresAt(claims, env) };
    }
    // Only which refusal: a tenant credential never opens anything here. Any other failure (the
    // key store unreachable) is passed on as it is, neither 401 nor 403.
    try {
      await tenants.authenticate(headers);
    } catch (err) {
      if (err instanceof TasklineError && err.code === 'unauthorized')
        throw new TasklineError(
          'unauthorized',
          'The bearer token is not an operator credential, nor any other.',
        );
      throw err;
    }
    throw new TasklineError('forbidden', 'Only operator credentials open the console; tenant keys never do.');
  }

  return {
    authenticate,
    configured: hashes.size > 0 || (verify !== null && role !== ''),
    middleware(req, _res, next) {
      guard(req, authenticate).then((operator) => {
        req.operator = operator;
        next();
      }, next);
    },
  };
}
