/**
 * The create path's question (TaskStore's `watchWebhooks`): does the tenant have endpoints? If
 * so the task enters the relay's index before its record is written. Answers are cached a
 * moment, so a create costs no extra round trip for a tenant without endpoints.
 */
import type { Redis } from 'ioredis';
import { hookKeys } from './keys.js';

/** How long a tenant's answer is reused: an endpoint made now gets tasks created a second later. */
const CACHE_MS = 1000;

export function webhookWatch(redis: Redis, now: () => number = Date.now) {
  const cache = new Map<string, { hooked: boolean; until: number }>();
  const hooked = async (tenant: string): Promise<boolean> => {
    const hit = cache.get(tenant);
    if (hit && hit.until > now()) return hit.hooked;
    const answer = (await redis.sismember(hookKeys.tenants, tenant)) === 1;
    cache.set(tenant, { hooked: answer, until: now() + CACHE_MS });
    return answer;
  };
  return async (task: { id: string; tenant: string }): Promise<boolean> => {
    if (!(await hooked(task.tenant))) return false;
    await redis.zadd(hookKeys.open(task.tenant), now(), task.id);
    return true;
  };
}
