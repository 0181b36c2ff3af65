/**
 * The create path's question (TaskStore's `watchWebhooks`): does the tenant have endpoints? If
 * so the task enters the relay's index before its record is written. Answers are cached a
 * moment, so a create costs no extra round trip for a tenant without endpoints; `warm` asks
 * ahead, beside a round trip the create makes anyway (the api's rate limit).
 */
import type { Redis } from 'ioredis';
import { hookKeys } from './keys.js';

/** How long a tenant's answer is reused: an endpoint made now gets tasks created a second later. */
const CACHE_MS = 1000;

/** `watchWebhooks` for a TaskStore, and its warm-up. */
export interface WebhookWatch {
  /** Whether the task's tenant has endpoints; if so, the task is indexed for the relay first. */
  (task: { id: string; tenant: string }): Promise<boolean>;
  /**
   * Asks for the tenant's answer now unless one is cached or asked for already, so that a create
   * about to be written finds it: its record then waits for no read of its own.
   */
  warm(tenant: string): void;
}

export function webhookWatch(redis: Redis, now: () => number = Date.now): WebhookWatch {
  // An answer is cached from when it is asked for: a create asking while it is on its way waits
  // for the same reply, and it is reused for CACHE_MS after it came.
  const cache = new Map<string, { hooked: Promise<boolean>; until: number }>();
  const hooked = (tenant: string): Promise<boolean> => {
    const hit = cache.get(tenant);
    if (hit && hit.until > now()) return hit.hooked;
    const entry = { hooked: redis.sismember(hookKeys.tenants, tenant).then((n) => n === 1), until: Infinity };
    cache.set(tenant, entry);
    entry.hooked.then(
      () => (entry.until = now() + CACHE_MS),
      () => cache.get(tenant) === entry && cache.delete(tenant),
    );
    return entry.hooked;
  };
  const watch = async (task: { id: string; tenant: string }): Promise<boolean> => {
    if (!(await hooked(task.tenant))) return false;
    await redis.zadd(hookKeys.open(task.tenant), now(), task.id);
    return true;
  };
  return Object.assign(watch, { warm: (tenant: string) => void hooked(tenant).catch(() => undefined) });
}
