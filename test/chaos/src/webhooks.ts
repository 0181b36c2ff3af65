/**
 * Webhooks under chaos: tenant A's endpoint is a flaky receiver (a real HTTP server in this
 * process that verifies every delivery with the `standardwebhooks` package, answers 500 to some
 * and drops the connection of others), registered before the load, while the faults kill the
 * schedulers (relay and delivery), the apis and Redis. The invariant, over every finished task the
 * run acknowledged that was hooked: each of its status events was delivered (verified) or is still
 * being retried (its BullMQ job unfinished, or its outbox entry not yet relayed while the task is
 * in the relay's index), and no event
 * arrived under two webhook ids.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Webhook } from 'standardwebhooks';
import { isFinalEventType, isTerminal, type TaskStore } from '@taskline/engine';
import { taskKeys } from '@taskline/engine/keys';
import { endpointQueue, endpointQueuePrefix, hookKeys } from '@taskline/webhooks';
import { KEYS, send, TENANTS } from './client.js';
import { rand, tracked } from './observed.js';

/** What the run's services need to deliver to a receiver on loopback, retrying fast and long. */
export const WEBHOOK_CHAOS_ENV = {
  TASKLINE_WEBHOOK_ALLOW_HTTP: 'true',
  TASKLINE_WEBHOOK_ALLOW_PRIVATE: 'true',
  TASKLINE_WEBHOOK_RETRY_BASE_MS: '100',
  TASKLINE_WEBHOOK_RETRY_CAP_MS: '1000',
  TASKLINE_WEBHOOK_MAX_ATTEMPTS: '100',
  TASKLINE_WEBHOOK_TIMEOUT_MS: '2000',
  TASKLINE_WEBHOOK_RELAY_MS: '100',
};
export const WEBHOOKS_INVARIANT =
  'every event of every finished hooked task was delivered or is still being retried, none under two ids';
/** Hooked finished tasks a run must have checked (a 20 s run acknowledges hundreds). */
export const MIN_HOOKED_TASKS = 20;
/** How long the checks wait for retries to catch up before judging what is left. */
const SETTLE_MS = 45_000;

/** The status events a webhook is told of (_emit.lua's HOOKED_TYPES): every one but deltas. */
const HOOKED = (type: string) =>
  isFinalEventType(type) || ['response.created', 'response.in_progress', 'response.restarted'].includes(type);

interface Delivery {
  body: { data: { task: { id: string }; event: { sequence_number: number } } };
}

/** The receiver's tally: verified deliveries by message id, refusals, and what failed to verify. */
const seen = {
  ids: new Map<string, string>(),
  /** `<task>/<seq>` -> every webhook id it arrived under. */
  byEvent: new Map<string, Set<string>>(),
  answered500: 0,
  dropped: 0,
  unverified: [] as string[],
};

export interface FlakyReceiver {
  endpoint: string;
  close(): Promise<void>;
}

/** Starts the receiver and registers it as tenant A's endpoint for every status change. */
export async function startFlakyReceiver(lb: string): Promise<FlakyReceiver> {
  let secret = '';
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const roll = rand(10);
      // One in ten: the connection drops before any answer (the sender sees a network error).
      if (roll === 0) {
        seen.dropped++;
        return req.socket.destroy();
      }
      // Two in ten: a 500 (a failed attempt, retried).
      if (roll <= 2) {
        seen.answered500++;
        res.statusCode = 500;
        return res.end('flaky');
      }
      accept(secret, Buffer.concat(chunks).toString('utf8'), req.headers as Record<string, string>);
      res.end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  const created = await send(lb, 'POST', '/lmsp/v1/webhooks', {
    headers: { authorization: `Bearer ${KEYS.a}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url, events: ['task.status'] }),
  });
  if (created.status !== 201) throw new Error(`webhook endpoint refused: ${created.status} ${created.text}`);
  ({ secret } = created.body as { secret: string });
  // The create path caches "has endpoints" for a second per tenant: tasks created after it are hooked.
  await sleep(1100);
  return {
    endpoint: (created.body as { id: string }).id,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** Verifies one delivery with the `standardwebhooks` package and tallies it under its id. */
function accept(secret: string, raw: string, headers: Record<string, string>): void {
  const id = String(headers['webhook-id']);
  let body: Delivery['body'];
  try {
    body = new Webhook(secret).verify(raw, headers) as Delivery['body'];
  } catch (err) {
    seen.unverified.push(`${id}: ${err instanceof Error ? err.message : String(err)}`);
    return;
  }
  const event = `${body.data.task.id}/${body.data.event.sequence_number}`;
  seen.ids.set(id, event);
  const ids = seen.byEvent.get(event) ?? new Set<string>();
  ids.add(id);
  seen.byEvent.set(event, ids);
}

/** The webhook ids each hooked, finished, tracked task's status events must have been delivered under. */
async function expectedMessages(store: TaskStore): Promise<Map<string, string[]>> {
  const expected = new Map<string, string[]>();
  for (const id of tracked.keys()) {
    const task = await store.get(id);
    if (!task || !isTerminal(task.status)) continue;
    if ((await store.redis.hget(taskKeys(id).task, 'hooks')) !== '1') continue;
    const events = await store.eventsAfter(id, 0);
    expected.set(
      id,
      events.filter((e) => HOOKED(e.type)).map((e) => `msg_${id}_${e.seq}`),
    );
  }
  return expected;
}

/** Message `id`'s delivery job for `endpoint` as Redis holds it, or null when there is none. */
async function jobOf(store: TaskStore, endpoint: string, id: string) {
  const key = `${endpointQueuePrefix(endpoint)}:${endpointQueue(endpoint)}:${id}`;
  if ((await store.redis.exists(key)) !== 1) return null;
  const [finishedOn, attempts, failed] = await store.redis.hmget(
    key,
    'finishedOn',
    'attemptsMade',
    'failedReason',
  );
  return { finishedOn, attempts: attempts ?? '0', failed };
}

/** Why message `id` of task `task` is not delivered yet, or null when nothing will deliver it. */
async function stillPending(
  store: TaskStore,
  endpoint: string,
  task: string,
  id: string,
): Promise<string | null> {
  const job = await jobOf(store, endpoint, id);
  if (job && !job.finishedOn) return `retrying (attempts ${job.attempts})`;
  // An outbox entry is pending only while the task is in the relay's index: no relay reads it otherwise.
  if ((await store.redis.zscore(hookKeys.open(TENANTS.a), task)) === null) return null;
  const seq = id.slice(id.lastIndexOf('_') + 1);
  const outbox = await store.redis.xrange(taskKeys(task).outbox, '-', '+');
  if (outbox.some(([, fields]) => (fields[1] ?? '').split(',').includes(seq))) return 'in its outbox';
  return null;
}

/** What Redis holds of a lost message: its job, the relay's last message of the task, the index entry. */
async function traceOf(store: TaskStore, endpoint: string, task: string, id: string): Promise<string> {
  const job = await jobOf(store, endpoint, id);
  const state = job
    ? `job finished ${job.finishedOn ?? '-'}, attempts ${job.attempts}, failed ${job.failed ?? '-'}`
    : 'no job';
  const last = await store.redis.hget(hookKeys.last(TENANTS.a), `${endpoint}/${task}`);
  const indexed = await store.redis.zscore(hookKeys.open(TENANTS.a), task);
  const kept = await store.redis.exists(hookKeys.message(TENANTS.a, endpoint, id));
  return `${state}; relay's last ${last ?? '-'}; indexed ${indexed ?? '-'}; body kept ${kept}`;
}

/**
 * The invariant, after waiting up to SETTLE_MS for the retries to catch up: a message neither
 * delivered nor pending was lost; an event under two ids was delivered twice as two messages.
 */
export async function checkWebhooks(store: TaskStore, receiver: FlakyReceiver) {
  const violations: string[] = [];
  let expected = await expectedMessages(store);
  const missing = () => [...expected.values()].flat().filter((id) => !seen.ids.has(id));
  for (const deadline = Date.now() + SETTLE_MS; missing().length > 0 && Date.now() < deadline;)
    await sleep(500);
  expected = await expectedMessages(store);
  for (const [task, ids] of expected)
    for (const id of ids.filter((m) => !seen.ids.has(m))) {
      const pending = await stillPending(store, receiver.endpoint, task, id);
      if (pending === null)
        violations.push(
          `${id}: neither delivered nor being retried (${await traceOf(store, receiver.endpoint, task, id)})`,
        );
    }
  for (const [event, ids] of seen.byEvent)
    if (ids.size > 1) violations.push(`event ${event} delivered under ${[...ids].join(', ')}`);
  for (const [id, event] of seen.ids) {
    const [task, seq] = event.split('/');
    if (id !== `msg_${task}_${seq}`) violations.push(`${id} carried event ${event}`);
  }
  violations.push(...seen.unverified.map((u) => `signature not verified: ${u}`));
  return {
    invariant: { name: WEBHOOKS_INVARIANT, checked: expected.size, violations },
    stats: {
      hooked_finished_tasks: expected.size,
      messages_expected: [...expected.values()].flat().length,
      delivered: seen.ids.size,
      pending_at_check: missing().length,
      answered_500: seen.answered500,
      connections_dropped: seen.dropped,
    },
  };
}
