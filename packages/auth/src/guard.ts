import type { IncomingHttpHeaders } from 'node:http';
import type { Request } from 'express';

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
