/**
 * Failed authentications per client address, counted in Redis (`auth_failures.lua`, one key per
 * address) so that the limit holds across every replica: past `maxFailures` in a window every
 * request from the address is refused, whatever its credential, before any key or JWT is checked,
 * until the window ends. Refusing a good key too is the point: a guess that hit would otherwise
 * be told by its 200.
 *
 * Only failures reach Redis. A replica remembers, for the rest of their window, the addresses it
 * saw fail and the count Redis gave back: an address it knows to be over is refused with no
 * command, one it saw fail under the limit costs one read per request (other replicas may have
 * taken it over since), and any other (every client that has not failed here) costs nothing. So a
 * replica that saw none of an address's failures checks its next credential; a failure there is
 * counted and refused as over, so past the limit at most one credential per replica and window is
 * ever checked.
 *
 * A credential the replica has verified itself (its digest, among the last `REMEMBERED`) is still
 * checked over the limit: behind a balancer that hides client addresses every client shares one
 * count, and a stranger's bad keys must not lock out a client already seen to hold a good one. No
 * guess gains from it, as only a credential that was good already is let through to be checked.
 */
import { createHash } from 'node:crypto';
import { isIPv6 } from 'node:net';
import type { Redis } from 'ioredis';
import { TasklineError } from '@taskline/engine';
import { limitKeys } from './limits.js';
import { loadLimitScripts, type LimitScripts } from './scripts.js';

export interface AuthFailureSettings {
  maxFailures: number;
  windowMs: number;
}

/** Addresses a replica remembers at most: the oldest are forgotten first, so an attack from many costs bounded memory. */
const REMEMBERED = 10_000;

/** What a replica knows of an address it saw fail: until when, and whether it is over the limit. */
interface Seen {
  until: number;
  over: boolean;
}

/**
 * Whom an address counts as: an IPv4 address (IPv4-mapped IPv6 too) itself, an IPv6 address its
 * /64, the smallest prefix a single site is given (RFC 6177): one host may hold all of it, and
 * would otherwise have 2^64 counts of its own.
 */
export function failureClient(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  if (!isIPv6(address)) return address;
  const [head, tail = ''] = address.toLowerCase().split('::');
  const left = head ? head.split(':') : [];
  const right = address.includes('::') ? (tail ? tail.split(':') : []) : [];
  // An embedded IPv4 tail (`64:ff9b::1.2.3.4`) stands for two groups.
  const width = right.reduce((n, g) => n + (g.includes('.') ? 2 : 1), left.length);
  const groups = [...left, ...Array<string>(8 - width).fill('0'), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}

export class AuthFailureLimits {
  private readonly scripts: LimitScripts;
  private readonly seen = new Map<string, Seen>();
  /** Digests of credentials this replica verified, the least recently used first. */
  private readonly vouched = new Set<string>();

  constructor(
    redis: Redis,
    readonly settings: AuthFailureSettings,
  ) {
    this.scripts = loadLimitScripts(redis);
  }

  /**
   * Runs `authenticate` for a request from `address` with `credential`: refused first when the
   * address is over the limit and this replica has not verified the credential before; an `unauthorized` failure is counted, and answered `too_many_auth_failures` instead
   * when it takes the address over. Other errors (forbidden, Redis unavailable) count nothing.
   */
  async guard<T>(address: string, credential: string, authenticate: () => Promise<T>): Promise<T> {
    const client = failureClient(address);
    const digest = createHash('sha256').update(credential).digest('base64');
    if (!this.vouched.has(digest)) await this.check(client);
    try {
      const authenticated = await authenticate();
      this.vouched.delete(digest);
      this.vouched.add(digest);
      if (this.vouched.size > REMEMBERED) this.vouched.delete(this.vouched.values().next().value!);
      return authenticated;
    } catch (err) {
      if (err instanceof TasklineError && err.code === 'unauthorized') await this.failed(client);
      throw err;
    }
  }

  private async check(address: string): Promise<void> {
    const known = this.seen.get(address);
    if (!known) return;
    const now = Date.now();
    if (known.until <= now) {
      this.seen.delete(address);
      return;
    }
    if (known.over) throw this.refusal(known.until - now);
    const seen = await this.count(address, 0);
    if (seen.over) throw this.refusal(seen.until - now);
  }

  private async failed(address: string): Promise<void> {
    const seen = await this.count(address, 1);
    // The failure that takes the address past the limit is answered as over it, not as a 401.
    if (seen.count > this.settings.maxFailures) throw this.refusal(seen.until - Date.now());
  }

  private async count(address: string, add: 0 | 1): Promise<Seen & { count: number }> {
    const [count, ttlMs] = await this.scripts.auth_failures(
      limitKeys.authFailures(address),
      add,
      this.settings.windowMs,
    );
    const seen = { until: Date.now() + ttlMs, over: count >= this.settings.maxFailures };
    this.seen.delete(address);
    if (count > 0) {
      this.seen.set(address, seen);
      if (this.seen.size > REMEMBERED) this.seen.delete(this.seen.keys().next().value!);
    }
    return { ...seen, count };
  }

  private refusal(leftMs: number): TasklineError {
    return new TasklineError(
      'too_many_auth_failures',
      'Too many failed authentications from this address; retry after the indicated time.',
      { retryAfterS: Math.max(1, Math.ceil(leftMs / 1000)) },
    );
  }
}
