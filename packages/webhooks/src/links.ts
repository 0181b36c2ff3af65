/**
 * Answer links (docs/webhooks.md, "Answer links"): a signed token naming one task, one question,
 * one choice and an expiry, so a chat button can answer the question or cancel the task without
 * the tenant's API key. The api checks the signature, the expiry, that the question is still
 * open, and takes the token's nonce once in the task's own slot.
 */
import { randomBytes } from 'node:crypto';
import { signToken, verifyToken } from '@taskline/engine';

/** What a link does: answer accept or decline (MCP elicitation actions), or cancel the task. */
export const LINK_CHOICES = ['accept', 'decline', 'cancel'] as const;
export type LinkChoice = (typeof LINK_CHOICES)[number];

export interface LinkClaims {
  /** Task id and tenant. */
  t: string;
  tn: string;
  /** The question's key. */
  k: string;
  c: LinkChoice;
  /** Expiry, ms since epoch. */
  e: number;
  /** Nonce: what makes the link one-use. */
  n: string;
}

export interface LinkSettings {
  /** TASKLINE_WEBHOOK_LINK_SECRET: signs and verifies links (the api and the scheduler share it). */
  secret: string;
  /** TASKLINE_PUBLIC_URL: where clients reach the api. */
  baseUrl: string;
  /** TASKLINE_WEBHOOK_LINK_TTL_S, ms: a link lasts this long at most (never past the question's deadline). */
  ttlMs: number;
}

/** The claims of a well-signed, unexpired token; null for anything else (never says which). */
export function verifyLink(secret: string, token: string, now: number): LinkClaims | null {
  const claims = verifyToken(secret, token) as Partial<LinkClaims> | null;
  if (
    !claims ||
    !LINK_CHOICES.includes(claims.c as LinkChoice) ||
    typeof claims.e !== 'number' ||
    claims.e <= now
  )
    return null;
  return claims as LinkClaims;
}

/** One link per choice for each open question of an `input_required` message. */
export function answerLinks(
  settings: LinkSettings,
  task: { id: string; tenant: string; inputDeadline: number | null },
  keys: string[],
  now: number,
): Record<string, Record<LinkChoice, string>> {
  const expiry = Math.min(now + settings.ttlMs, task.inputDeadline ?? Infinity);
  const base = settings.baseUrl.replace(/\/+$/, '');
  const link = (k: string, c: LinkChoice) =>
    `${base}/lmsp/v1/answer-links/${signToken(settings.secret, { t: task.id, tn: task.tenant, k, c, e: expiry, n: randomBytes(12).toString('base64url') })}`;
  return Object.fromEntries(
    keys.map((k) => [
      k,
      { accept: link(k, 'accept'), decline: link(k, 'decline'), cancel: link(k, 'cancel') },
    ]),
  );
}
