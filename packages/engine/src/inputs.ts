// Input requests: a task asks its caller questions, parks, and resumes on the answers.
import type { Redis } from 'ioredis';
import { sweepEach, type StoreCore, type SweepFailed } from './core.js';
import { problem, type Problem } from './errors.js';
import { newId } from './ids.js';
import { taskKeys } from './keys.js';
import { check, type TaskKind } from './records.js';
import { finalEvent, statusEvent } from './response.js';
import { isTerminal, type TaskStatus } from './states.js';

/** Input keys of callbacks (callbacks.ts) start with this: no caller sees or answers them. */
export const CALLBACK_KEY_PREFIX = 'callback:';
export const isCallbackKey = (key: string) => key.startsWith(CALLBACK_KEY_PREFIX);

/**
 * Asks the caller questions (or waits for a callback: callbacks.ts), for `timeoutMs` at most
 * (TASKLINE_INPUT_TIMEOUT_S by default). Returns the answers already on record for keys asked before (a
 * retried attempt replays them instead of asking again). When some are open the task is parked
 * (`parked`): the asking attempt no longer holds it, and must stop; an answer resumes it under a
 * new attempt. The parked index entry is written first (as the create journal is), so a crash
 * between the two steps leaves an entry the deadline sweep drops, never a parked task no sweep sees.
 */
export async function requestInput(
  h: StoreCore,
  id: string,
  attempt: number,
  requests: Record<string, unknown>,
  timeoutMs = h.inputTimeoutMs,
): Promise<{ waiting: boolean; parked: boolean; answers: Record<string, unknown> }> {
  const task = await h.require(id);
  const keys = taskKeys(id);
  const entries = Object.entries(requests);
  const event = statusEvent('input_required', { input_requests: requests });
  const deadline = h.now() + timeoutMs;
  // The parked entry, with what it replaces. On a cluster the index is on another node: it is
  // written before the park is sent.
  const indexed = h.sched.parkBeforeAsk(id, deadline);
  await h.indexFirst(indexed);
  const asked = h.scripts.request_input(
    keys.task,
    keys.events,
    keys.channel,
    keys.inputs,
    h.now(),
    attempt,
    deadline,
    JSON.stringify(entries.map(([k]) => k)),
    entries.length,
    ...entries.flatMap(([k, v]) => [k, JSON.stringify(v)]),
    event.type,
    JSON.stringify(event.data),
    // Its nonce: a re-sent ask (its reply lost) answers as it did, and this attempt parks (request_input.lua).
    newId('step'),
  );
  const [replaced, reply] = await Promise.all([indexed, asked]);
  if (reply[0] !== 'ok') {
    // The entry as it was: an attempt that lost the task asks after the one that parked it.
    await h.sched.parkRefused(id, deadline, replaced);
    if (reply[0] !== 'answered') check(id, reply);
    return { waiting: false, parked: false, answers: await answers(h.redis, id) };
  }
  h.observe(reply[2] as TaskKind, 'input_required', Number(reply[3]));
  // Parked: no lease to sweep, no place under the tenant's running cap while nobody works on it.
  // Only this attempt's: an answer may have queued the task since, and a new attempt been
  // dispatched and claimed under the same id (park_unindex.lua).
  await h.sched.releaseParked(task, attempt);
  return { waiting: true, parked: true, answers: await answers(h.redis, id) };
}

/**
 * The caller's answers; unknown and already answered keys are ignored, partial answers kept. The
 * answer that closes the current ask resumes a parked task: it is queued (shown `running`) and
 * offered for a new attempt. A journal entry (`intake`) goes first, in the same round trip on one
 * Redis, so a crash or a lost connection before the offer leaves the reconciler a task to offer.
 * An answer that resumes nothing leaves its entry to the reconciler (which drops it, the task not
 * queued) unless the task has ended: the entry is one per task, and another answer may have
 * written it too and resumed the task, its offer still to come or lost.
 */
export async function provideInput(
  h: StoreCore,
  id: string,
  tenant: string,
  given: Record<string, unknown>,
): Promise<{ accepted: number; status: TaskStatus }> {
  const before = await h.require(id, tenant);
  const keys = taskKeys(id);
  const entries = Object.entries(given);
  const event = statusEvent('running', { input_received: true });
  // Whatever the read saw, short of an end: the task may park between the read and the script,
  // and the script then resume it. On a cluster the journal is on another node: a refused one
  // would strand the task queued.
  const journalled = isTerminal(before.status) ? null : h.sched.journal(id, h.now());
  if (journalled) await h.indexFirst(journalled);
  const [, reply] = await Promise.all([
    journalled,
    h.scripts.provide_input(
      keys.task,
      keys.events,
      keys.channel,
      keys.inputs,
      h.now(),
      entries.length,
      ...entries.flatMap(([k, v]) => [k, JSON.stringify(v)]),
      event.type,
      JSON.stringify(event.data),
    ),
  ]);
  if (reply[0] === 'terminal') {
    // Nothing resumes an ended task: no answer needs the entry.
    if (journalled) await h.sched.unjournal(id);
    return { accepted: 0, status: reply[1] as TaskStatus };
  }
  check(id, reply);
  const status = reply[1] as TaskStatus;
  if (reply[3] === 1) {
    // Queued for a new attempt (shown running meanwhile).
    h.observe(before.kind, 'queued', before.createdAt);
    // Drops the journal entry in the same step; then the deadline no longer applies.
    await h.enqueue({ ...before, attempt: Number(reply[4]), seq: Number(reply[5]) });
    await h.sched.unpark(id);
  } else if (before.status === 'input_required' && status === 'running') {
    h.observe(before.kind, 'running', before.createdAt);
  }
  return { accepted: Number(reply[2]), status };
}

/**
 * Questions still open: those of the current ask (every asked key for a task asked before that was
 * kept) not yet answered. Callbacks are not questions its caller can answer: left out.
 */
export async function openInputRequests(redis: Redis, id: string): Promise<Record<string, unknown>> {
  const [raw, current] = await Promise.all([
    redis.hgetall(taskKeys(id).inputs),
    redis.hget(taskKeys(id).task, 'input_keys'),
  ]);
  const asked = current
    ? (JSON.parse(current) as string[])
    : Object.keys(raw)
        .filter((f) => f.startsWith('q:'))
        .map((f) => f.slice(2));
  const open: Record<string, unknown> = {};
  for (const key of asked.filter((k) => !isCallbackKey(k))) {
    const question = raw[`q:${key}`];
    if (question !== undefined && raw[`a:${key}`] === undefined) open[key] = JSON.parse(question);
  }
  return open;
}

export async function answers(redis: Redis, id: string): Promise<Record<string, unknown>> {
  const raw = await redis.hgetall(taskKeys(id).inputs);
  const out: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(raw))
    if (field.startsWith('a:')) out[field.slice(2)] = JSON.parse(value);
  return out;
}

/**
 * Why a parked task failed at its deadline: `callback_timeout` when all it waited for were
 * callbacks of outside jobs, else `input_timeout` (its caller did not answer).
 */
function deadlineError(inputKeys: string | null, timeoutMs: number): Problem {
  const waited = inputKeys ? (JSON.parse(inputKeys) as string[]) : [];
  if (waited.length > 0 && waited.every(isCallbackKey))
    return problem('callback_timeout', 'No callback arrived before the deadline the tool set.', 408);
  return problem(
    'input_timeout',
    `Nobody answered the task's input requests within ${Math.round(timeoutMs / 1000)} s.`,
    408,
  );
}

/**
 * Fails every parked task whose input deadline passed (`input_timeout`), and drops index entries
 * of tasks no longer waiting. Returns the ids failed. Safe on any number of replicas at once.
 */
export async function sweepInputDeadlines(
  h: StoreCore,
  limit = 500,
  skipped?: SweepFailed,
): Promise<string[]> {
  const now = h.now();
  const due = await h.sched.dueParked(now, limit);
  const failed: string[] = [];
  await sweepEach(
    due,
    async (id) => {
      const keys = taskKeys(id);
      const error = deadlineError(await h.redis.hget(keys.task, 'input_keys'), h.inputTimeoutMs);
      const end = finalEvent('failed', null, 'tool', error);
      const reply = await h.scripts.input_timeout(
        keys.task,
        keys.events,
        keys.channel,
        keys.inputs,
        keys.tokens,
        now,
        h.options.taskRetentionMs,
        h.options.eventRetentionMs,
        JSON.stringify(error),
        'null',
        end.type,
        JSON.stringify(end.data),
      );
      if (reply[0] === 'corrupt') check(id, reply);
      if (reply[0] === 'ok') {
        failed.push(id);
        h.observe(reply[1] as TaskKind, 'failed', Number(reply[2]));
        const task = await h.redis.hmget(keys.task, 'tenant', 'parent');
        await h.released({ id, tenant: task[0] ?? '', parent: task[1] ?? null }, { failure: error.code });
      }
      // Only the entry the sweep saw: a task parked again meanwhile has a later deadline, and keeps it.
      await h.sched.unparkAsRead(id, now);
    },
    skipped,
  );
  return failed;
}
