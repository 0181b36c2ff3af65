/**
 * Callbacks of outside jobs (`ctx.awaitCallback`, docs/webhooks.md "Callbacks"): a tool's wait
 * for an outside system is a question of its task under a reserved key, answered by a POST on a
 * signed URL instead of by the caller. Owns the key, the signed tokens (shared with answer links)
 * and the two writes: expecting a callback and delivering one.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { StoreCore } from './core.js';
import { CALLBACK_KEY_PREFIX, isCallbackKey, provideInput } from './inputs.js';
import { taskKeys } from './keys.js';
import { check } from './records.js';
import { isTerminal } from './states.js';

/** The input request a callback is recorded as (shown in the task's `input_required` event). */
export const CALLBACK_METHOD = 'taskline/callback';

export const callbackKey = (name: string) => `${CALLBACK_KEY_PREFIX}${name}`;

const mac = (secret: string, payload: string) =>
  createHmac('sha256', secret).update(payload).digest('base64url');

/** A token carrying `claims` (JSON), signed with HMAC-SHA256: `<payload>.<mac>`, both base64url. */
export function signToken(secret: string, claims: object): string {
  const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
  return `${payload}.${mac(secret, payload)}`;
}

/** The claims of a well-signed token, or null (never says why). */
export function verifyToken(secret: string, token: string): Record<string, unknown> | null {
  const [payload, sig, extra] = token.split('.');
  if (!payload || !sig || extra !== undefined) return null;
  const want = Buffer.from(mac(secret, payload));
  const got = Buffer.from(sig);
  if (want.length !== got.length || !timingSafeEqual(want, got)) return null;
  try {
    const claims: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    return typeof claims === 'object' && claims !== null ? (claims as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** Where callback URLs point and what signs them: TASKLINE_PUBLIC_URL, TASKLINE_WEBHOOK_LINK_SECRET. */
export interface CallbackSettings {
  baseUrl: string;
  secret: string;
}

/** The settings from the environment; undefined (callbacks off) without a link secret. */
export function callbackSettingsFromEnv(env: {
  TASKLINE_WEBHOOK_LINK_SECRET: string;
  TASKLINE_PUBLIC_URL: string;
}): CallbackSettings | undefined {
  const secret = env.TASKLINE_WEBHOOK_LINK_SECRET;
  return secret ? { secret, baseUrl: env.TASKLINE_PUBLIC_URL } : undefined;
}

/** What a callback token names: the task, its tenant, the callback's key; `cb` marks it a callback's. */
export interface CallbackClaims {
  cb: 1;
  t: string;
  tn: string;
  k: string;
}

/**
 * The callback URL of one key of one task. The same on every attempt: an outside job started by an
 * attempt that crashed before parking still reaches the task. It needs no expiry of its own: it
 * is refused once the key is answered or the task ended (at its deadline at the latest).
 */
export function callbackUrl(
  settings: CallbackSettings,
  task: { id: string; tenant: string },
  key: string,
): string {
  const claims: CallbackClaims = { cb: 1, t: task.id, tn: task.tenant, k: key };
  return `${settings.baseUrl.replace(/\/+$/, '')}/lmsp/v1/callbacks/${signToken(settings.secret, claims)}`;
}

/** The claims of a callback token signed with `secret`; null for anything else (an answer link's included). */
export function verifyCallback(secret: string, token: string): CallbackClaims | null {
  const claims = verifyToken(secret, token);
  if (!claims || claims.cb !== 1) return null;
  const { t, tn, k } = claims;
  if (typeof t !== 'string' || typeof tn !== 'string' || typeof k !== 'string' || !isCallbackKey(k))
    return null;
  return { cb: 1, t, tn, k };
}

/**
 * Records that attempt `attempt` expects the callback `key` (expect_callback.lua); true when it
 * arrived already (an earlier attempt handed the URL out and the outside job answered).
 */
export async function expectCallback(
  h: StoreCore,
  id: string,
  attempt: number,
  key: string,
  request: unknown,
): Promise<boolean> {
  const keys = taskKeys(id);
  const reply = await h.scripts.expect_callback(
    keys.task,
    keys.events,
    keys.inputs,
    attempt,
    key,
    JSON.stringify(request),
  );
  check(id, reply);
  return reply[1] === 1;
}

/** How a callback was taken: the task's status after it, or why it was not. */
export type CallbackOutcome = { taken: true; status: string } | { taken: false; reason: 'used' | 'refused' };

/**
 * Delivers a callback's JSON body as the answer of its key: the first delivery wins (HSETNX),
 * and resumes the task when it was parked on it. A key already answered is `used` (for as long
 * as the task is kept); a task that ended otherwise, expired or never expected the key `refused`.
 */
export async function deliverCallback(
  h: StoreCore,
  claims: CallbackClaims,
  body: unknown,
): Promise<CallbackOutcome> {
  const answered = () => h.redis.hexists(taskKeys(claims.t).inputs, `a:${claims.k}`);
  const task = await h.get(claims.t, claims.tn);
  if (!task) return { taken: false, reason: 'refused' };
  if (await answered()) return { taken: false, reason: 'used' };
  if (isTerminal(task.status)) return { taken: false, reason: 'refused' };
  const { accepted, status } = await provideInput(h, claims.t, claims.tn, { [claims.k]: body });
  if (accepted === 1) return { taken: true, status };
  // Another delivery won the race, or the task ended or never expected the key.
  return { taken: false, reason: (await answered()) ? 'used' : 'refused' };
}
