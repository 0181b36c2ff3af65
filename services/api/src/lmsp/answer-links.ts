/**
 * Answer links (docs/webhooks.md, "Answer links"): `POST /lmsp/v1/answer-links/{token}` answers
 * one open question of one task (accept, decline) or cancels the task, without the tenant's API
 * key; the signed token is the credential and can do nothing else. It works once, before its
 * expiry, while its question is open. GET shows a page with the button only: a link preview or a
 * crawler following the link changes nothing.
 */
import type { Request, Response, Router } from 'express';
import type { Redis } from 'ioredis';
import { takeOnce, TasklineError, type TaskStore } from '@taskline/engine';
import { verifyLink, type LinkClaims, type LinkSettings } from '@taskline/webhooks';
import { methodNotAllowed } from '../problem.js';

export interface AnswerLinkDeps {
  redis: Redis;
  store: TaskStore;
  links: LinkSettings | undefined;
}

const refused = (detail: string) => new TasklineError('answer_link_refused', detail);

export function mountAnswerLinks(router: Router, deps: AnswerLinkDeps): void {
  router
    .route('/answer-links/:token')
    .get((req, res) => void showLink(deps, req, res))
    .post((req, res) => useLink(deps, req, res))
    .all(methodNotAllowed(['GET', 'POST']));
}

function claimsOf(deps: AnswerLinkDeps, req: Request): LinkClaims {
  const claims = deps.links && verifyLink(deps.links.secret, String(req.params.token), Date.now());
  if (!claims) throw refused('This answer link is not valid, or has expired.');
  return claims;
}

function showLink(deps: AnswerLinkDeps, req: Request, res: Response): void {
  const claims = claimsOf(deps, req);
  const label = claims.c === 'cancel' ? 'Cancel the task' : `${claims.c === 'accept' ? 'Accept' : 'Decline'}`;
  res
    .type('html')
    .send(
      `<!doctype html><meta charset="utf-8"><title>Taskline</title><form method="post"><button>${label}</button></form>`,
    );
}

/**
 * Takes the link's nonce once, checks its question is open, then answers or cancels. The nonce
 * goes first, so a second use is told so; one taken for a question no longer open costs nothing
 * (a question's key, once answered, stays answered for the task's life).
 */
async function useLink(deps: AnswerLinkDeps, req: Request, res: Response): Promise<void> {
  const claims = claimsOf(deps, req);
  const { store, redis } = deps;
  if (!(await takeOnce(redis, claims.t, claims.n, claims.e - Date.now())))
    throw new TasklineError('answer_link_used', 'This answer link was used already.');
  const task = await store.get(claims.t, claims.tn);
  if (!task || task.status !== 'input_required' || !(claims.k in (await store.openInputRequests(task.id))))
    throw refused('The task is no longer waiting for this answer.');
  const after =
    claims.c === 'cancel'
      ? (await store.cancel(task.id, task.tenant)).task.status
      : (await store.provideInput(task.id, task.tenant, { [claims.k]: answerOf(claims) })).status;
  res.json({ object: 'answer_link_result', task_id: task.id, choice: claims.c, task_status: after });
}

/** An MCP elicitation result (MCP 2025-11-25, Elicitation): the choice as its action. */
function answerOf(claims: LinkClaims): Record<string, unknown> {
  return claims.c === 'accept' ? { action: 'accept', content: {} } : { action: 'decline' };
}
