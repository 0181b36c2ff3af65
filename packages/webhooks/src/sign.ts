/**
 * Standard Webhooks signing (standardwebhooks.com, "Signature scheme"): `v1,` + base64 of
 * HMAC-SHA256 over `<webhook-id>.<webhook-timestamp>.<body>`, keyed by the secret's bytes
 * (base64 after `whsec_`); one signature per valid secret, space separated.
 */
import { createHmac, randomBytes } from 'node:crypto';

const PREFIX = 'whsec_';

/** A new signing secret: 32 random bytes, in the `whsec_` form receivers' libraries take. */
export function newSecret(): string {
  return PREFIX + randomBytes(32).toString('base64');
}

/** `v1,<sig>` for one secret. */
export function signWith(secret: string, id: string, timestampS: number, body: string): string {
  const key = Buffer.from(secret.slice(PREFIX.length), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestampS}.${body}`).digest('base64')}`;
}

/** The three Standard Webhooks headers of one attempt, signed by every secret given. */
export function webhookHeaders(secrets: string[], id: string, timestampS: number, body: string) {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampS),
    'webhook-signature': secrets.map((s) => signWith(s, id, timestampS, body)).join(' '),
  };
}
