/**
 * The gate every LMSP request but OPTIONS passes before its handler: authentication, the one
 * admission path (`@taskline/admission`) and the JSON body; with the create requests' counter.
 */
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { TaskReservation } from '@taskline/admission';
import { TasklineError } from '@taskline/engine';
import type { ApiCore } from '../core.js';

/** LMSP routes that create a task (paths inside the LMSP router). */
const CREATE_PATHS = new Set(['/tasks', '/responses']);

/** Creates' places under the tenant's unfinished-task cap, taken with their rate-limit token. */
export type Reservations = WeakMap<Request, TaskReservation>;

export function tenantOf(req: Request): string {
  if (!req.tenant) throw new TasklineError('unauthorized', 'This request is not authenticated.');
  return req.tenant.id;
}

export function requireJson(req: Request, _res: Response, next: NextFunction): void {
  if (!req.is('application/json')) {
    next(
      new TasklineError('invalid_request', 'The request needs a JSON body (Content-Type: application/json).'),
    );
  } else next();
}

/** Authentication, admission and the body; a create's place lands in `reservations`. */
export function lmspGate(core: ApiCore, reservations: Reservations): Router {
  const { env, admission } = core;
  /** Each request's admission, asked for as it arrives and awaited once its body is read. */
  const decisions = new WeakMap<Request, Promise<void>>();

  function admit(req: Request, res: Response, next: NextFunction): void {
    const creates = req.method === 'POST' && CREATE_PATHS.has(req.path);
    const decision = admission.admit(tenantOf(req), res, creates).then((slot) => {
      if (slot) reservations.set(req, slot);
    });
    decision.catch(() => undefined); // handled below, once the body is read
    decisions.set(req, decision);
    next();
  }

  // The body is read while the bucket answers (one round trip saved), but the bucket speaks
  // first: an over-limit request gets its 429 whatever its body, as if nothing had been read.
  function admitted(req: Request, _res: Response, next: NextFunction): void {
    decisions.get(req)!.then(() => next(), next);
  }

  function admittedOnError(err: unknown, req: Request, _res: Response, next: NextFunction): void {
    // Refused before the limits were asked (authentication): that error stands.
    const decision = decisions.get(req);
    if (!decision) return next(err);
    decision.then(() => next(err), next);
  }

  const gate = express.Router();
  gate.use(core.auth.middleware, admit);
  gate.use(express.json({ limit: env.TASKLINE_MAX_BODY_BYTES, strict: true }));
  gate.use(admitted, admittedOnError);
  return gate;
}

/** Counts create requests by outcome: 2xx accepted, 4xx rejected (validation, limits), 5xx error. */
export function countCreate(core: ApiCore) {
  return function countCreate(req: Request, res: Response, next: NextFunction): void {
    const { metrics } = core;
    if (metrics) {
      res.once('close', () => {
        const outcome = res.statusCode < 400 ? 'accepted' : res.statusCode < 500 ? 'rejected' : 'error';
        const tenant = req.tenant ? metrics.tenant(req.tenant.id) : 'unauthenticated';
        metrics.taskCreatesTotal.inc({ protocol: 'lmsp', tenant, outcome });
      });
    }
    next();
  };
}
