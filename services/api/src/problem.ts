// RFC 9457 problem+json answers with stable codes: the error handler, 404 and 405.
import type { ErrorRequestHandler, RequestHandler, Response } from 'express';
import {
  problem,
  redisUnavailableReason,
  TasklineError,
  unconfirmedCreate,
  type ErrorCode,
  type Problem,
  type RedisUnavailableReason,
} from '@taskline/engine';
import { HTTP_STATUS, isCallersFault } from '@taskline/lmsp';
import type { Logger } from '@taskline/log';
import { NOT_RETRYABLE, openAiError } from './openai/errors.js';

export const PROBLEM_TYPE = 'application/problem+json';

/**
 * Writes an RFC 9457 problem with the stable code; `status` overrides the code's own (404/405
 * routes). The body also carries the OpenAI-style `error` member (`openai/errors.ts`).
 */
export function sendProblem(
  res: Response,
  code: ErrorCode,
  detail: string,
  extra: Record<string, unknown> = {},
  status?: number,
): void {
  const base = problem(code, detail, status ?? HTTP_STATUS[code]);
  const error = openAiError(base, extra);
  // OpenAI's form of the path is told in its member only; the problem's `param` keeps LMSP's.
  const { openai_param: _openAiParam, ...shown } = extra;
  const param = typeof shown.param === 'string' ? shown.param : error.param;
  const body: Problem & Record<string, unknown> = {
    ...base,
    ...shown,
    ...(param === null ? {} : { param }),
    error,
  };
  if (NOT_RETRYABLE.has(code)) res.setHeader('x-should-retry', 'false');
  res.status(body.status).type(PROBLEM_TYPE).send(JSON.stringify(body));
}

/** What a TasklineError may show a client beyond its detail: only the listed, safe extensions. */
function extensions(err: TasklineError): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (Array.isArray(err.details.errors)) out.errors = err.details.errors;
  if (typeof err.details.status === 'string') out.task_status = err.details.status;
  if (typeof err.details.param === 'string') out.param = err.details.param;
  if (typeof err.details.openai_param === 'string') out.openai_param = err.details.openai_param;
  return out;
}

/**
 * A create Redis did not confirm may have made its task all the same, which then runs: the answer
 * names it (`task_id`), so the client reads it rather than create a second one (docs/lmsp.md).
 */
function mayHaveCreated(err: unknown, detail: string): string {
  const id = unconfirmedCreate(err);
  return id
    ? `${detail} The task may have been created all the same, as ${id}: read it (GET /lmsp/v1/tasks/${id}) before creating another.`
    : detail;
}

function createdAs(err: unknown): { task_id?: string } {
  const id = unconfirmedCreate(err);
  return id ? { task_id: id } : {};
}

const BODY_ERRORS: Record<string, string> = {
  'entity.parse.failed': 'The request body is not valid JSON (a JSON object is expected).',
  'encoding.unsupported':
    'The request body must be JSON in UTF-8, with identity, gzip, deflate or br encoding.',
  'charset.unsupported': 'The request body must be JSON in UTF-8.',
  'request.aborted': 'The request body ended before its declared length.',
  'request.size.invalid': 'The request body does not match its Content-Length.',
};

/**
 * Body-parser (`express.json`) failures: http-errors marked `expose` with a 4xx status. 413 is
 * `payload_too_large`; every other one (bad JSON, charset, encoding, a corrupt compressed body)
 * is `invalid_request`.
 */
function bodyParserError(err: unknown): { code: ErrorCode; detail: string } | null {
  const e = err as { status?: unknown; expose?: unknown; type?: unknown; message?: unknown } | null;
  if (!e || e.expose !== true || typeof e.status !== 'number' || e.status < 400 || e.status >= 500)
    return null;
  if (e.status === 413)
    return { code: 'payload_too_large', detail: 'The request body is larger than this deployment accepts.' };
  const known = typeof e.type === 'string' ? BODY_ERRORS[e.type] : undefined;
  return {
    code: 'invalid_request',
    detail: known ?? `The request body could not be read: ${String(e.message)}.`,
  };
}

/**
 * The one error handler: every failure leaves as problem+json, never an HTML page or a stack.
 * Unknown errors are logged with the request id and answered `500 internal_error`. A Redis that
 * cannot answer now (unreachable, or a "try again" reply: OOM, READONLY, BUSY, MASTERDOWN,
 * LOADING...) is `503 unavailable` with Retry-After and its `reason`, told to `onUnavailable`; so
 * is a Taskline error that means the same (`replication_timeout`, a slot with no known primary).
 */
export function errorHandler(
  logger: Logger,
  redisReady: () => boolean,
  onUnavailable: (reason: RedisUnavailableReason) => void = () => undefined,
): ErrorRequestHandler {
  const storeUnavailable = (requestId: unknown, reason: RedisUnavailableReason, err: unknown) => {
    logger.warn('task store unavailable', { request_id: requestId, reason, err });
    onUnavailable(reason);
  };
  return (err, req, res, _next) => {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (err instanceof TasklineError) {
      if (err.code === 'unauthorized') res.setHeader('WWW-Authenticate', 'Bearer realm="taskline"');
      if (err.code === 'rate_limited' || err.code === 'too_many_auth_failures')
        res.setHeader('Retry-After', String(err.details.retryAfterS ?? 1));
      // Raised by Taskline itself for a store that cannot take the write now (`unavailable`,
      // `replication_timeout`): a "try again" like Redis's own, never a failed request.
      const reason = redisUnavailableReason(err);
      if (reason) {
        storeUnavailable(req.id, reason, err);
        res.setHeader('Retry-After', '1');
      } else if (!isCallersFault(err.code)) logger.error('request failed', { request_id: req.id, err });
      sendProblem(res, err.code, mayHaveCreated(err, err.message), { ...extensions(err), ...createdAs(err) });
      return;
    }
    const parsed = bodyParserError(err);
    if (parsed) {
      sendProblem(res, parsed.code, parsed.detail);
      return;
    }
    // The router's decodeURIComponent of a path segment that is not percent-encoded UTF-8.
    if (err instanceof URIError) {
      sendProblem(res, 'invalid_request', 'The request path is not valid percent-encoded UTF-8.');
      return;
    }
    // Redis may be back by now while this request's command failed with the connection: 503 too.
    const reason = redisUnavailableReason(err) ?? (redisReady() ? null : 'connection');
    if (reason) {
      storeUnavailable(req.id, reason, err);
      res.setHeader('Retry-After', '1');
      const detail = 'The task store cannot take this request now; retry shortly.';
      sendProblem(res, 'unavailable', mayHaveCreated(err, detail), { reason, ...createdAs(err) });
      return;
    }
    logger.error('unhandled error', { request_id: req.id, err });
    sendProblem(res, 'internal_error', 'Something went wrong on our side.');
  };
}

/** Unknown routes: 404 as problem+json. LMSP 1.0 section 9.3 has no route code, so it is `invalid_request`. */
export const routeNotFound: RequestHandler = (req, res) => {
  // `baseUrl`: a router's own fallback sees only the path below where it is mounted.
  sendProblem(res, 'invalid_request', `No route ${req.method} ${req.baseUrl}${req.path}.`, {}, 404);
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
