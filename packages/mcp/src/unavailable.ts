/** The JSON-RPC answer of a request Redis could not serve: retryable, with `Retry-After`, as on LMSP. */
import type { RedisUnavailableReason } from '@taskline/engine';
import { UNAVAILABLE_CODE } from './errors.js';

export const RETRY_UNAVAILABLE_S = 1;

export const unavailableError = (id: unknown, reason: RedisUnavailableReason) => ({
  jsonrpc: '2.0',
  id: id ?? null,
  error: {
    code: UNAVAILABLE_CODE,
    message: 'Service unavailable, retry shortly',
    data: { code: 'unavailable', reason, retryAfter: RETRY_UNAVAILABLE_S },
  },
});
