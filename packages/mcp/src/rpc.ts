// JSON-RPC error replies written ahead of the SDK, with their codes.
import type { Response } from 'express';
import type { TasklineError } from '@taskline/engine';
import { MCP_ERRORS } from './errors.js';

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

/** HTTP 429 with Retry-After and -32005 for a `rate_limited` or `too_many_auth_failures` TasklineError. */
export const rateLimited = (res: Response, id: unknown, err: TasklineError) => {
  const retryAfter = Number(err.details.retryAfterS ?? 1);
  const { http, rpc } = MCP_ERRORS[err.code];
  res.setHeader('Retry-After', String(retryAfter));
  return rpcError(res, http, id, rpc, err.message, { code: err.code, retryAfter });
};
