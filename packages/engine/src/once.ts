/**
 * One-use marks in a task's own slot (`tl:{<id>}:once:<nonce>`): what makes an answer link
 * (docs/webhooks.md) work once, however many replicas and clicks race for it.
 */
import type { Redis } from 'ioredis';
import { onceKey } from './keys.js';

/** True for the first taker of `nonce` on task `id`; the mark lasts `ttlMs` (the link's life). */
export async function takeOnce(redis: Redis, id: string, nonce: string, ttlMs: number): Promise<boolean> {
  return (await redis.set(onceKey(id, nonce), '1', 'PX', Math.max(1, Math.ceil(ttlMs)), 'NX')) === 'OK';
}
