/**
 * Callbacks of outside jobs (docs/webhooks.md, "Callbacks"): `POST /lmsp/v1/callbacks/{token}`
 * delivers a JSON body to the tool task waiting in `ctx.awaitCallback`, without the tenant's API
 * key; the signed token is the credential, names one callback of one task and can do nothing
 * else. It takes one callback, and none once the task ended.
 */
import express, { type Request, type Response, type Router } from 'express';
import { TasklineError, verifyCallback, type CallbackClaims, type TaskStore } from '@taskline/engine';
import { methodNotAllowed } from '../problem.js';
import { requireJson } from './gate.js';

export interface CallbackDeps {
  store: TaskStore;
  /** TASKLINE_WEBHOOK_LINK_SECRET; undefined when callbacks are off (every token is refused). */
  secret: string | undefined;
  /** TASKLINE_MAX_BODY_BYTES: the largest callback body. */
  maxBodyBytes: number;
}

const refused = (detail: string) => new TasklineError('callback_refused', detail);

export function mountCallbacks(router: Router, deps: CallbackDeps): void {
  router
    .route('/callbacks/:token')
    .post(
      (req, _res, next) => {
        claimsOf(deps, req);
        next();
      },
      requireJson,
      express.json({ limit: deps.maxBodyBytes, strict: true }),
      (req, res) => deliver(deps, req, res),
    )
    .all(methodNotAllowed(['POST']));
}

/** The token's claims; refused before the body is read when it is not a callback token of ours. */
function claimsOf(deps: CallbackDeps, req: Request): CallbackClaims {
  const claims = deps.secret && verifyCallback(deps.secret, String(req.params.token));
  if (!claims) throw refused('This callback URL is not valid.');
  return claims;
}

async function deliver(deps: CallbackDeps, req: Request, res: Response): Promise<void> {
  const claims = claimsOf(deps, req);
  const outcome = await deps.store.deliverCallback(claims, req.body);
  if (!outcome.taken && outcome.reason === 'used')
    throw new TasklineError('callback_used', 'This callback URL was used already.');
  if (!outcome.taken) throw refused('The task is no longer waiting for this callback.');
  res.json({ object: 'callback_result', task_id: claims.t, task_status: outcome.status });
}
