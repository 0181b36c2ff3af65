/**
 * The chaos run's invariants over the task records, event streams and answers the run observed
 * (see README.md in this folder); tools.ts, visible.ts and minimums.ts add theirs.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { DEFAULTS } from '@taskline/config';
import { isFinalEventType, isTerminal, type TaskRecord } from '@taskline/engine';
import { TENANTS } from './client.js';
import type { ChaosStack } from './chaos-stack.js';
import { legacyInvariant } from './legacy.js';
import { scanKeys } from '@taskline/testing';
import {
  explainServerErrors,
  fiveXx,
  idemIds,
  listeners,
  observeTerminal,
  sse,
  TERMINAL_BOUND_MS,
  totals,
  tracked,
} from './observed.js';

import type { Invariant } from './observed.js';

export type { Invariant };

export async function checkInvariants(c: ChaosStack): Promise<Invariant[]> {
  const deadline = Date.now() + TERMINAL_BOUND_MS;
  const records = new Map<string, TaskRecord | null>();
  // Every acknowledged task reaches a terminal state within the bound.
  for (;;) {
    let open = 0;
    for (const t of tracked.values()) {
      const rec = await c.store.get(t.id);
      records.set(t.id, rec);
      if (rec && isTerminal(rec.status)) observeTerminal(t.id, rec.status);
      else open++;
    }
    if (open === 0 || Date.now() > deadline) break;
    await sleep(500);
  }
  const exists: Invariant = {
    name: 'acknowledged task exists and is terminal within the bound',
    checked: 0,
    violations: [],
  };
  const stable: Invariant = { name: 'terminal state never changes', checked: 0, violations: [] };
  const streams: Invariant = {
    name: 'event stream is 1..N, no gap or duplicate, one final event, last',
    checked: 0,
    violations: [],
  };
  const policy: Invariant = { name: 'on_restart policy applied', checked: 0, violations: [] };
  const idem: Invariant = {
    name: 'retried idempotent creates made no duplicates',
    checked: 0,
    violations: [],
  };
  const outputs = new Map<string, number>();
  for (const t of tracked.values()) {
    const rec = records.get(t.id) ?? null;
    exists.checked++;
    if (!rec) {
      exists.violations.push(`${t.id} (${t.via}) is missing`);
      continue;
    }
    if (!isTerminal(rec.status)) exists.violations.push(`${t.id} (${t.via}) still ${rec.status}`);
    stable.checked++;
    const distinct = new Set([...t.terminalSeen, ...(isTerminal(rec.status) ? [rec.status] : [])]);
    if (distinct.size > 1) stable.violations.push(`${t.id}: seen ${[...distinct].join(' then ')}`);
    streams.checked++;
    const { events } = await c.store.events(t.id, 0);
    const seqs = events.map((e) => e.seq);
    if (seqs.some((s, i) => s !== i + 1) || seqs.length !== rec.seq)
      streams.violations.push(`${t.id}: stored seqs ${seqs.slice(0, 30).join(',')} (record seq ${rec.seq})`);
    if (t.via === 'lmsp') {
      const finals = events.filter((e) => isFinalEventType(e.type));
      if (isTerminal(rec.status) && (finals.length !== 1 || !isFinalEventType(events.at(-1)!.type)))
        streams.violations.push(`${t.id}: ${finals.length} final events, last ${events.at(-1)?.type}`);
      const text = (rec.result as { output?: { content?: { text?: string }[] }[] } | null)?.output?.[0]
        ?.content?.[0]?.text;
      if (rec.status === 'succeeded' && text !== undefined) outputs.set(text, (outputs.get(text) ?? 0) + 1);
    }
  }
  // The instant model's output is fixed, so every completed task must carry exactly it, however
  // often it was restarted: retry starts over, resume continues after its snapshot.
  const canonical = [...outputs.entries()].sort((a, b) => b[1] - a[1])[0]?.[0];
  const policyStats: Record<
    string,
    {
      tasks: number;
      interrupted: number;
      failed_restarted: number;
      failed_at_cap: number;
      succeeded: number;
    }
  > = {};
  // The cluster's processes run with the default cap on runs (TASKLINE_MAX_ATTEMPTS).
  const maxAttempts = Number(DEFAULTS.TASKLINE_MAX_ATTEMPTS);
  for (const t of tracked.values()) {
    const rec = records.get(t.id);
    if (!rec || t.via !== 'lmsp' || !isTerminal(rec.status)) continue;
    const s = (policyStats[t.onRestart] ??= {
      tasks: 0,
      interrupted: 0,
      failed_restarted: 0,
      failed_at_cap: 0,
      succeeded: 0,
    });
    s.tasks++;
    const restarted = rec.error?.code === 'server_restarted';
    const interrupted = rec.restarts > 0 || restarted;
    if (interrupted) s.interrupted++;
    if (restarted) s.failed_restarted++;
    // A retry or resume task ends server_restarted only when interrupted on its last allowed run:
    // its restarts (interruptions before this one) reached the cap less one.
    const capped = restarted && t.onRestart !== 'fail';
    if (capped) s.failed_at_cap++;
    if (capped && rec.restarts + 1 < maxAttempts)
      policy.violations.push(
        `${t.id}: on_restart ${t.onRestart} ended server_restarted after ${rec.restarts + 1} of ${maxAttempts} runs`,
      );
    if (rec.status === 'succeeded') s.succeeded++;
    policy.checked++;
    // Interruptions, not claims, are counted (`restarts`): a run beyond the first is one an
    // interruption caused, and `fail` is never interrupted twice, whatever a clock or a lost reply did.
    if (rec.attempt > rec.restarts + 1)
      policy.violations.push(
        `${t.id}: on_restart ${t.onRestart} ran ${rec.attempt} attempts after ${rec.restarts} restarts`,
      );
    if (t.onRestart === 'fail' && (rec.attempt > 1 || rec.restarts > 0))
      policy.violations.push(
        `${t.id}: on_restart fail ran ${rec.attempt} attempts, ${rec.restarts} restarts`,
      );
    if (rec.restarts >= maxAttempts)
      policy.violations.push(
        `${t.id}: ${rec.restarts} restarts, more than the cap of ${maxAttempts} runs allows`,
      );
    const text = (rec.result as { output?: { content?: { text?: string }[] }[] } | null)?.output?.[0]
      ?.content?.[0]?.text;
    if (rec.status === 'succeeded' && canonical !== undefined && text !== canonical)
      policy.violations.push(
        `${t.id}: on_restart ${t.onRestart}, attempt ${rec.attempt}: output ${JSON.stringify(text)?.slice(0, 80)} is not the model's`,
      );
  }
  for (const [key, ids] of idemIds) {
    idem.checked++;
    if (ids.size !== 1) idem.violations.push(`${key} named ${[...ids].join(', ')}`);
  }
  // No task record beyond those the keys named: scan every LMSP task of the tenant.
  const keyed = new Set([...idemIds.values()].flatMap((s) => [...s]));
  let stored = 0;
  const unacknowledged: string[] = [];
  for (const key of await scanKeys(c.store.redis, 'tl:{*}:task')) {
    const [tenant, kind, request] = await c.store.redis.hmget(key, 'tenant', 'kind', 'request');
    if (tenant !== TENANTS.a || kind !== 'response' || !request?.includes('task chaos-')) continue;
    stored++;
    const id = key.slice(4, -6);
    if (!keyed.has(id)) unacknowledged.push(id);
  }
  // A create whose every answer was lost exists without a 202: allowed (the client gave up), and
  // it is never a second task for a key that was acknowledged.
  idem.checked += stored;
  (idem as Invariant & { stored: number; unacknowledged: number }).stored = stored;
  (idem as Invariant & { unacknowledged: number }).unacknowledged = unacknowledged.length;
  for (const id of unacknowledged) {
    const request = (await c.store.get(id))?.request as { input?: string } | undefined;
    const key = /task (chaos-[\w-]+)/.exec(String(request?.input))?.[1];
    if (key && idemIds.has(key)) idem.violations.push(`${id}: a second task for acknowledged key ${key}`);
  }
  const noServerErrors: Invariant = {
    name: 'no 5xx except 503 + Retry-After while Redis was down',
    checked: totals.requests,
    violations: explainServerErrors(fiveXx.violations),
  };
  const listenersInv: Invariant = {
    name: 'listeners got the terminal notification or recovered it by polling',
    checked: listeners.subscribed,
    violations: listeners.violations,
  };
  const sseInv: Invariant = {
    name: 'SSE readers (reconnecting with Last-Event-ID) saw 1..N and one final event',
    checked: sse.readers,
    violations: sse.violations,
  };
  Object.assign(policy, { per_policy: policyStats });
  return [exists, stable, streams, sseInv, policy, idem, noServerErrors, listenersInv, legacyInvariant()];
}
