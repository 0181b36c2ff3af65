// The face of @taskline/auth: API keys and JWTs to tenants, and the Express middleware that asks them.
import type { IncomingHttpHeaders } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import type { Redis } from 'ioredis';
import type { Env } from '@taskline/config';
import { TasklineError } from '@taskline/engine/core';
import { ApiKeyStore, hashKey, TENANT_PATTERN } from './keys.js';
import { unguarded, type AuthGuard } from './guard.js';
import { jwtExpiresAt, jwtVerifier, looksLikeJwt } from './jwt.js';

export { ApiKeyStore, TENANT_PATTERN, assertTenantId, hashKey, type ApiKeyInfo } from './keys.js';
export { exceptOptions, unguarded, type AuthGuard } from './guard.js';
export { jwtVerifier, looksLikeJwt, type JwtSettings, type JwtVerifier } from './jwt.js';
export { EXPIRED_EVENT, whenExpired } from './expiry.js';
export {
  operatorAuthenticator,
  type Operator,
  type OperatorAuthenticator,
  type OperatorAuthSettings,
} from './operators.js';

/** Who made a request. `id` scopes every task, key, limit and idempotency record. */
export interface Tenant {
  id: string;
  via: 'static_key' | 'api_key' | 'jwt';
  /** A JWT's: when it stops being accepted (ms since the epoch); the streams it opens end then. Keys never expire. */
  expiresAt?: number;
}

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** Set by the authenticator's middleware on every request it lets through. */
      tenant?: Tenant;
    }
  }
}

export type AuthSettings = Pick<
  Env,
  | 'TASKLINE_API_KEYS'
  | 'TASKLINE_JWT_PUBLIC_KEY'
  | 'TASKLINE_JWT_JWKS_URL'
  | 'TASKLINE_JWT_TENANT_CLAIM'
  | 'TASKLINE_JWT_ISSUER'
  | 'TASKLINE_JWT_AUDIENCE'
  | 'TASKLINE_JWT_CLOCK_TOLERANCE_S'
  | 'TASKLINE_JWT_ALGORITHMS'
>;

export interface Authenticator {
  /** Express middleware: sets `req.tenant`, or passes a 401 TasklineError to the error handler. */
  middleware: (req: Request, res: Response, next: NextFunction) => void;
  /** The tenant a request's headers prove; throws TasklineError('unauthorized'). */
  authenticate(headers: IncomingHttpHeaders): Promise<Tenant>;
  /**
   * What a stream opened by `tenant` with `headers` asks on each heartbeat (false ends it), or
   * undefined when nothing can revoke it while it is open (see below).
   */
  stillAuthorized(headers: IncomingHttpHeaders, tenant: Tenant): (() => Promise<boolean>) | undefined;
}

const unauthorized = (detail: string) => new TasklineError('unauthorized', detail);

/**
 * Bearer authentication for every Taskline HTTP surface (LMSP and MCP). A token is, in order:
 * a static key from `TASKLINE_API_KEYS`, a JWT (when a key or JWKS is configured), or an API key
 * made by the CLI and stored hashed in Redis. Every failure reads the same to the client.
 */
export function authenticator(env: AuthSettings, redis: Redis, guard: AuthGuard = unguarded): Authenticator {
  const staticKeys = new Map<string, string>();
  for (const pair of env.TASKLINE_API_KEYS.split(',').filter(Boolean)) {
    const at = pair.indexOf(':');
    staticKeys.set(hashKey(pair.slice(at + 1)), pair.slice(0, at));
  }
  const verify = jwtVerifier(env);
  const keys = new ApiKeyStore(redis);

  async function authenticate(headers: IncomingHttpHeaders): Promise<Tenant> {
    const header = headers.authorization;
    if (!header) throw unauthorized('This request needs an Authorization: Bearer header.');
    const match = /^Bearer +([\x21-\x7e]+) *$/i.exec(header);
    if (!match) throw unauthorized('The Authorization header must be "Bearer <token>".');
    const token = match[1]!;
    const fromEnv = staticKeys.get(hashKey(token));
    if (fromEnv) return { id: fromEnv, via: 'static_key' };
    if (verify && looksLikeJwt(token)) {
      let claims: Record<string, unknown>;
      try {
        claims = await verify(token);
      } catch {
        throw unauthorized('The bearer token is invalid or expired.');
      }
      const claim = claims[env.TASKLINE_JWT_TENANT_CLAIM];
      if (typeof claim !== 'string' || !TENANT_PATTERN.test(claim)) {
        throw unauthorized('The bearer token names no valid tenant.');
      }
      return { id: claim, via: 'jwt', expiresAt: jwtExpiresAt(claims, env) };
    }
    const stored = await keys.lookup(token);
    if (stored) return { id: stored.tenant, via: 'api_key' };
    throw unauthorized('The bearer token is invalid or expired.');
  }

  /**
   * A key made by the CLI can be revoked while a stream it opened is open: asked again on each
   * heartbeat, the stream ends as the key's next request would be refused, on whichever replica
   * holds it. A static key is revoked only with a restart, and a JWT is not asked again: nothing
   * revokes it, and its streams end at its expiry (`Tenant.expiresAt`). A key store that cannot
   * answer now cuts nothing.
   */
  function stillAuthorized(headers: IncomingHttpHeaders, tenant: Tenant) {
    if (tenant.via !== 'api_key') return undefined;
    return () =>
      authenticate(headers).then(
        (now) => now.id === tenant.id,
        (err: unknown) => !(err instanceof TasklineError && err.code === 'unauthorized'),
      );
  }

  return {
    authenticate,
    stillAuthorized,
    middleware(req, _res, next) {
      guard(req, authenticate).then((tenant) => {
        req.tenant = tenant;
        next();
      }, next);
    },
  };
}
