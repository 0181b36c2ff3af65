/**
 * Overload: 48 concurrent clients of a second tenant create tasks past the limits; every refusal
 * must be 429/503 with Retry-After, api RSS stays under 1 GiB, and a create is accepted again
 * once the load drops.
 */
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { jsonHeaders, KEYS, send } from './client.js';
import type { ChaosStack } from './chaos-stack.js';
import { SECONDS } from './observed.js';

export async function overload(c: ChaosStack) {
  const rss = () =>
    c.apis.map((a) => {
      try {
        const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${a.child!.pid}/status`, 'utf8'));
        return Math.round(Number(m?.[1] ?? 0) / 1024);
      } catch {
        return 0;
      }
    });
  const before = rss();
  let peak = before;
  const shed: Record<string, number> = {};
  let withoutRetryAfter = 0;
  let sent = 0;
  const until = Date.now() + Math.max(4000, SECONDS * 100);
  const body = JSON.stringify({ type: 'response', input: { model: 'instant', input: 'overload' } });
  const sampler = setInterval(() => (peak = rss().map((v, i) => Math.max(v, peak[i]!))), 250);
  await Promise.all(
    Array.from({ length: 48 }, async () => {
      while (Date.now() < until) {
        sent++;
        const r = await send(c.lb, 'POST', '/lmsp/v1/tasks', { headers: jsonHeaders(KEYS.b), body }).catch(
          () => null,
        );
        const s = String(r?.status ?? 'network');
        shed[s] = (shed[s] ?? 0) + 1;
        if (r && (r.status === 429 || r.status === 503) && !r.headers['retry-after']) withoutRetryAfter++;
      }
    }),
  );
  clearInterval(sampler);
  // Recovery on its own: once the load drops, a create is accepted again within the bound.
  const dropped = Date.now();
  let recoveredMs: number | null = null;
  while (Date.now() - dropped < 60_000) {
    const r = await send(c.lb, 'POST', '/lmsp/v1/tasks', { headers: jsonHeaders(KEYS.b), body }).catch(
      () => null,
    );
    if (r?.status === 202) {
      recoveredMs = Date.now() - dropped;
      break;
    }
    await sleep(Number(r?.headers['retry-after'] ?? 1) * 1000);
  }
  const after = rss();
  const violations: string[] = [];
  if (!shed['429'] && !shed['503']) violations.push('no request was shed with 429/503');
  if (withoutRetryAfter > 0) violations.push(`${withoutRetryAfter} shed answers without Retry-After`);
  const other5xx = Object.entries(shed).filter(([s]) => /^5/.test(s) && s !== '503');
  if (other5xx.length) violations.push(`other 5xx under overload: ${JSON.stringify(other5xx)}`);
  if (peak.some((mb) => mb > 1024)) violations.push(`api RSS peaked at ${peak.join('/')} MiB`);
  if (recoveredMs === null) violations.push('no create accepted within 60 s after the load dropped');
  return {
    sent,
    answers: shed,
    rss_mib: { before, peak, after },
    recovered_after_ms: recoveredMs,
    violations,
  };
}

export type OverloadResult = Awaited<ReturnType<typeof overload>>;
