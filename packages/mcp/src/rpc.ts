// JSON-RPC error replies written ahead of the SDK, with their codes.
import type { Response } from 'express';
import type { TasklineError } from '@taskline/engine';

/** A JSON-RPC error reply with its HTTP status, written by the layer in front of the SDK. */
export const rpcError = (
  res: Response,
  http: number,
  id: unknown,
  code: number,
  message: string,
  data?: unknown,
) =>
  res
    .status(http)
    .json({ jsonrpc: '2.0', id: id ?? null, error: { code, message, ...(data !== undefined && { data }) } });

/**
 * JSON-RPC error of a request the task store cannot take now (Redis unreachable, or answering
 * OOM, READONLY, BUSY, MASTERDOWN, LOADING...): HTTP 503 with Retry-After, `data: { code:
 * 'unavailable', reason, retryAfter }`, as LMSP's `503 unavailable`.
 */
export const UNAVAILABLE_CODE = -32006;

/** JSON-RPC error of a request over the tenant's limits (implementation-defined server range). */
export const RATE_LIMITED_CODE = -32005;

/** HTTP 429 with Retry-After and -32005 for a `rate_limited` or `too_many_auth_failures` TasklineError. */
export const rateLimited = (res: Response, id: unknown, err: TasklineError) => {
  const retryAfter = Number(err.details.retryAfterS ?? 1);
  res.setHeader('Retry-After', String(retryAfter));
  return rpcError(res, 429, id, RATE_LIMITED_CODE, err.message, { code: err.code, retryAfter });
};
