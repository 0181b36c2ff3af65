// How each request's authentication runs: under the api's failed-authentication limit, or as it is.
import type { IncomingHttpHeaders } from 'node:http';
import type { Request, RequestHandler } from 'express';

/**
 * What runs each request's authentication in the middlewares here: the api's limit of failed
 * authentications per client address, which may refuse the request before `authenticate` and
 * counts its failures. Without one, `authenticate` runs as it is.
 */
export type AuthGuard = <T>(
  req: Request,
  authenticate: (headers: IncomingHttpHeaders) => Promise<T>,
) => Promise<T>;

/** The guard that runs `authenticate` as it is. */
export const unguarded: AuthGuard = (req, authenticate) => authenticate(req.headers);

/**
 * `handler` (authentication, and what needs it) for every method but OPTIONS, which goes on
 * without it to its route's `Allow`: it tells which methods a path takes, nothing of a tenant's,
 * and a CORS preflight never carries credentials (Fetch standard, "CORS-preflight fetch").
 */
export const exceptOptions =
  (handler: RequestHandler): RequestHandler =>
  (req, res, next) =>
    req.method === 'OPTIONS' ? next() : handler(req, res, next);
