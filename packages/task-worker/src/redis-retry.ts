/** The worker's one way to wait out a Redis that is unavailable for a moment (docs/redis-faults.md). */
import { setTimeout as sleep } from 'node:timers/promises';
import { isRedisUnavailable } from '@taskline/engine';

/**
 * `write`, made again while Redis is unavailable (a reset, an outage, BUSY/LOADING/OOM), for up to
 * `forMs`: a blip delays a write instead of losing it. Only for writes safe to make twice: every
 * worker script, called again with the same nonce (a call that ran though its reply was lost is
 * recognised, not applied again).
 */
export async function whenRedisAnswers<T>(forMs: number, write: () => Promise<T>): Promise<T> {
  const until = Date.now() + forMs;
  for (let pause = 50; ; pause = Math.min(pause * 2, 1000)) {
    try {
      return await write();
    } catch (err) {
      if (!isRedisUnavailable(err) || Date.now() + pause > until) throw err;
      await sleep(pause);
    }
  }
}
