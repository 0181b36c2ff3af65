import type { ErrorRequestHandler, RequestHandler, Response } from 'express';
import { problem, TasklineError, type ErrorCode, type Problem } from '@taskline/engine';
import type { Logger } from '@taskline/log';

export const PROBLEM_TYPE = 'application/problem+json';

/** Writes an RFC 9457 problem with the stable code; `status` overrides the code's own (404/405 routes). */
export function sendProblem(
  res: Response,
  code: ErrorCode,
  detail: string,
  extra: Record<string, unknown> = {},
  status?: number,
): void {
  const body: Problem & Record<string, unknown> = {
    ...problem(code, detail, status ?? new TasklineError(code, '').status),
    ...extra,
  };
  res.status(body.status).type(PROBLEM_TYPE).send(JSON.stringify(body));
}

/** What a TasklineError may show a client beyond its detail: only the listed, safe extensions. */
function extensions(err: TasklineError): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (Array.isArray(err.details.errors)) out.errors = err.details.errors;
  if (typeof err.details.status === 'string') out.task_status = err.details.status;
  return out;
}

/** Body-parser (`express.json`) failures, recognised by their `type`, mapped to stable codes. */
function bodyParserError(err: unknown): { code: ErrorCode; detail: string } | null {
  const type = (err as { type?: unknown } | null)?.type;
  if (typeof type !== 'string') return null;
  switch (type) {
    case 'entity.too.large':
      return {
        code: 'payload_too_large',
        detail: 'The request body is larger than this deployment accepts.',
      };
    case 'entity.parse.failed':
      return {
        code: 'invalid_request',
        detail: 'The request body is not valid JSON (a JSON object is expected).',
      };
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return {
        code: 'invalid_request',
        detail: 'The request body must be UTF-8 JSON without content encoding.',
      };
    case 'request.aborted':
    case 'request.size.invalid':
      return { code: 'invalid_request', detail: 'The request body ended before its declared length.' };
    default:
      return null;
  }
}

/**
 * The one error handler: every failure leaves as problem+json, never an HTML page or a stack.
 * Unknown errors are logged with the request id and answered `500 internal_error` (or `503
 * unavailable` while Redis is unreachable, so clients retry).
 */
export function errorHandler(logger: Logger, redisReady: () => boolean): ErrorRequestHandler {
  return (err, req, res, _next) => {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (err instanceof TasklineError) {
      if (err.code === 'unauthorized') res.setHeader('WWW-Authenticate', 'Bearer realm="taskline"');
      if (err.code === 'rate_limited') res.setHeader('Retry-After', String(err.details.retryAfterS ?? 1));
      const status = err.status >= 500 ? err.status : undefined;
      if (status) logger.error('request failed', { request_id: req.id, err });
      sendProblem(res, err.code, err.message, extensions(err));
      return;
    }
    const parsed = bodyParserError(err);
    if (parsed) {
      sendProblem(res, parsed.code, parsed.detail);
      return;
    }
    logger.error('unhandled error', { request_id: req.id, err });
    if (!redisReady()) sendProblem(res, 'unavailable', 'The task store is unreachable; retry shortly.');
    else sendProblem(res, 'internal_error', 'Something went wrong on our side.');
  };
}

/** Unknown routes: 404 as problem+json. LMSP-GAPS 9.3 has no route code, so it is `invalid_request`. */
export const routeNotFound: RequestHandler = (req, res) => {
  sendProblem(res, 'invalid_request', `No route ${req.method} ${req.path}.`, {}, 404);
};

/** A known path asked with a method it does not take: 405 with `Allow` (OPTIONS answers 204 with it). */
export function methodNotAllowed(allowed: string[]): RequestHandler {
  const allow = [...allowed, ...(allowed.includes('GET') ? ['HEAD'] : []), 'OPTIONS'].join(', ');
  return (req, res) => {
    res.setHeader('Allow', allow);
    if (req.method === 'OPTIONS') {
      res.status(204).end();
      return;
    }
    sendProblem(
      res,
      'invalid_request',
      `${req.method} is not allowed here; use ${allowed.join(' or ')}.`,
      {},
      405,
    );
  };
}
