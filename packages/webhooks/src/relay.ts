/**
 * The webhook relay: moves each hooked task's outbox entries (written by the scripts that wrote
 * the events) into delivery jobs, one BullMQ queue per endpoint, then deletes them once every
 * connected replica has the jobs. A crash between the two queues the same job ids again, which
 * BullMQ ignores: at least once, one id.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Queue } from 'bullmq';
import {
  dropOutbox,
  dropOutboxEntries,
  isCallbackKey,
  isTerminal,
  readOutboxes,
  ReplicaAck,
  taskStatuses,
  type OutboxEntry,
  type TaskRecord,
  type TaskStore,
} from '@taskline/engine';
import type { Logger } from '@taskline/log';
import type { DisabledNotice, EndpointRecord, EndpointStore } from './endpoints.js';
import { hookKeys } from './keys.js';
import { answerLinks, type LinkSettings } from './links.js';
import { EndpointQueues, type DeliveryJob } from './queues.js';
import {
  messageBody,
  messageId,
  messageType,
  noticeMessage,
  seqOf,
  wants,
  type EventMessage,
} from './messages.js';
import type { RetrySchedule } from './schedule.js';

export interface RelayOptions {
  redis: Redis;
  /** A connection for the BullMQ queues (`connectQueueRedis`). */
  queueRedis: Redis;
  store: TaskStore;
  endpoints: EndpointStore;
  schedule: RetrySchedule;
  logger: Logger;
  /** How long a message is kept for redelivery (TASKLINE_WEBHOOK_KEEP_S), ms. */
  keepMs: number;
  /** Hooked tasks read per tenant per pass. */
  batch?: number;
  /** Answer links in `input_required` messages; none without (TASKLINE_WEBHOOK_LINK_SECRET unset). */
  links?: LinkSettings;
}

/**
 * A relay pass holds its tenant's lock at most this long: a crashed relay's lapses this soon, and
 * it is what a restart waits at worst before that tenant's deliveries move again. A pass that runs
 * longer (a very large backlog) may overlap the next relay's, which costs order, never a delivery.
 */
const RELAY_LOCK_MS = 5_000;
/**
 * How long an indexed task may have no record before the relay takes it for gone: far beyond a
 * create's round trips, and beyond the clock difference of the api host that indexed it.
 */
const UNWRITTEN_GRACE_MS = 60_000;
/** Deletes the lock only if this relay still holds it. */
const RELEASE =
  "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

export class Relay {
  private readonly queues: EndpointQueues;
  /** This relay's lock value. */
  private readonly owner = randomUUID();
  /**
   * Waits for the replicas of each queue it added jobs to before an entry or notice is deleted:
   * else a failover to a replica without the job loses the message for good (the store's setting,
   * TASKLINE_REPLICA_ACK_TIMEOUT_MS; none when off).
   */
  private readonly queued: ReplicaAck | null;

  constructor(private readonly o: RelayOptions) {
    this.queues = new EndpointQueues(o.queueRedis);
    const timeoutMs = o.store.options.replicaAckTimeoutMs;
    this.queued = timeoutMs ? new ReplicaAck(o.queueRedis, timeoutMs) : null;
  }

  /**
   * One pass over every tenant with endpoints; returns the messages queued. A tenant whose part
   * fails (its node failing over, a replica that did not confirm in time) holds up no other: the
   * pass goes on, then throws the first failure.
   */
  async pass(): Promise<number> {
    let queued = 0;
    const failures: unknown[] = [];
    for (const tenant of await this.o.redis.smembers(hookKeys.tenants))
      queued += await this.passTenant(tenant).catch((err: unknown) => failures.push(err) && 0);
    if (failures.length > 0) throw failures[0];
    return queued;
  }

  /**
   * A tenant's hooked tasks, page by page, under the tenant's relay lock: one relay at a time
   * per tenant, so two scheduler replicas never interleave their writes of a task's order chain.
   */
  private async passTenant(tenant: string): Promise<number> {
    const lock = hookKeys.relayLock(tenant);
    if ((await this.o.redis.set(lock, this.owner, 'PX', RELAY_LOCK_MS, 'NX')) !== 'OK') return 0;
    try {
      const endpoints = await this.o.endpoints.list(tenant);
      const page = this.o.batch ?? 500;
      let queued = await this.passNotices(tenant, endpoints);
      for (let start = 0; ; start += page) {
        const entries = await this.o.redis.zrange(
          hookKeys.open(tenant),
          start,
          start + page - 1,
          'WITHSCORES',
        );
        queued += await this.passTasks(tenant, entries, endpoints);
        if (entries.length < 2 * page) return queued;
      }
    } finally {
      await this.o.redis.eval(RELEASE, 1, lock, this.owner).catch(() => undefined);
    }
  }

  /**
   * Tells the tenant's other enabled endpoints of each endpoint disabled for failing, whatever
   * events they chose, then drops the notice. A crash in between queues the same job ids again.
   */
  private async passNotices(tenant: string, endpoints: EndpointRecord[]): Promise<number> {
    const notices = await this.o.redis.hgetall(hookKeys.notices(tenant));
    let queued = 0;
    for (const [id, raw] of Object.entries(notices)) {
      const message = noticeMessage(JSON.parse(raw) as DisabledNotice);
      for (const endpoint of endpoints.filter((e) => e.enabled && e.id !== id)) {
        const job: DeliveryJob = {
          tenant,
          endpoint: endpoint.id,
          message: message.id,
          body: message.body,
          after: null,
        };
        await this.keep(endpoint, message.id, message.at, message.body);
        await this.queues
          .of(endpoint.id)
          .add('notice', job, { jobId: message.id, ...this.o.schedule.jobOptions() });
        queued++;
      }
      await this.replicated(endpoints.filter((e) => e.enabled && e.id !== id).map((e) => e.id));
      await this.o.redis.hdel(hookKeys.notices(tenant), id);
    }
    return queued;
  }

  /** One page of the index: `entries` is [id, indexed at (ms), ...] as ZRANGE WITHSCORES answers. */
  private async passTasks(tenant: string, entries: string[], endpoints: EndpointRecord[]): Promise<number> {
    const ids = entries.filter((_, i) => i % 2 === 0);
    if (ids.length === 0) return 0;
    // Statuses before outboxes: a task read as ended has written its last entry before the read.
    const statuses = await taskStatuses(this.o.redis, ids);
    const outboxes = await readOutboxes(this.o.redis, ids);
    let queued = 0;
    for (const [i, id] of ids.entries()) {
      const outbox = outboxes.get(id);
      const status = statuses[i] ?? null;
      if (outbox) queued += await this.relayTask(tenant, id, outbox, endpoints);
      else if (status === null ? this.gone(Number(entries[2 * i + 1])) : isTerminal(status))
        await this.close(tenant, id);
    }
    return queued;
  }

  /**
   * Whether a task without a record is gone (expired, or its create failed) rather than not yet
   * written: the create path indexes a task before it writes its record (watch.ts).
   */
  private gone(indexedAt: number): boolean {
    return indexedAt < Date.now() - UNWRITTEN_GRACE_MS;
  }

  /** Queues the deliveries of a task's outbox entries, in order, then deletes the entries. */
  private async relayTask(tenant: string, id: string, entries: OutboxEntry[], endpoints: EndpointRecord[]) {
    const task = await this.o.store.get(id);
    if (!task) {
      await this.close(tenant, id);
      return 0;
    }
    const first = Math.min(...entries.flatMap((e) => e.seqs));
    const events = await this.o.store.eventsAfter(id, first - 1);
    let queued = 0;
    // Per endpoint, the message this pass queued (or found queued) last: what a re-queued one follows.
    const handled = new Map<string, string>();
    for (const entry of entries) {
      const at = Number(entry.entry.split('-')[0]);
      for (const event of events.filter((e) => entry.seqs.includes(e.seq))) {
        const message: EventMessage = { id: messageId(id, event.seq), type: messageType(event), event, at };
        const extra = this.extraOf(message, task);
        for (const endpoint of endpoints.filter((ep) => wants(ep, message.type))) {
          const body = messageBody(message, task, endpoint, extra);
          queued += await this.enqueue(endpoint, task, message, body, handled.get(endpoint.id) ?? null);
          handled.set(endpoint.id, message.id);
        }
      }
    }
    await this.replicated([...handled.keys()]);
    await dropOutboxEntries(
      this.o.redis,
      id,
      entries.map((e) => e.entry),
    );
    return queued;
  }

  /** An `input_required` message's answer links, one set per question it asks. */
  private extraOf(message: EventMessage, task: TaskRecord): Record<string, unknown> {
    if (!this.o.links || message.type !== 'task.input_required') return {};
    const asked = (JSON.parse(message.event.data) as { input_requests?: Record<string, unknown> })
      .input_requests;
    // A callback (ctx.awaitCallback) is no question of the caller's: no link answers it.
    const questions = Object.keys(asked ?? {}).filter((k) => !isCallbackKey(k));
    return { answer_links: answerLinks(this.o.links, task, questions, message.at) };
  }

  /**
   * Queues one message for one endpoint behind its previous one about the task. `prev` is the
   * message this pass handled before it for the endpoint, if any.
   */
  private async enqueue(
    endpoint: EndpointRecord,
    task: TaskRecord,
    message: EventMessage,
    body: string,
    prev: string | null,
  ) {
    const { redis } = this.o;
    const lastField = `${endpoint.id}/${task.id}`;
    const queue = this.queues.of(endpoint.id);
    const last = await redis.hget(hookKeys.last(endpoint.tenant), lastField);
    if (last !== null && seqOf(last) >= message.event.seq) {
      // Queued by a pass that stopped before deleting its entry (a replica did not confirm in
      // time, say): done, unless a failover lost the job; then it goes again behind the message
      // before it in this pass (those of earlier passes were replicated before they were deleted).
      if (await queue.getJob(message.id)) return 0;
      await this.add(queue, endpoint, task, message, body, prev);
      return 1;
    }
    await this.add(queue, endpoint, task, message, body, last);
    await redis.hset(hookKeys.last(endpoint.tenant), lastField, message.id);
    return 1;
  }

  /** Keeps a message for redelivery and adds its delivery job, to go after `after`'s. */
  private async add(
    queue: Queue<DeliveryJob>,
    endpoint: EndpointRecord,
    task: TaskRecord,
    message: EventMessage,
    body: string,
    after: string | null,
  ) {
    const job: DeliveryJob = {
      tenant: endpoint.tenant,
      endpoint: endpoint.id,
      message: message.id,
      body,
      after,
      ...(task.traceparent && { traceparent: task.traceparent }),
    };
    await this.keep(endpoint, message.id, message.at, body);
    await queue.add('deliver', job, { jobId: message.id, ...this.o.schedule.jobOptions() });
  }

  /** Resolves once every connected replica has the jobs added to these endpoints' queues. */
  private async replicated(endpoints: string[]): Promise<void> {
    if (this.queued && endpoints.length > 0)
      await this.queued.wait(endpoints.map((e) => this.queues.of(e).toKey('id')));
  }

  /** Keeps the message for redelivery (by id or by time) for `keepMs`. */
  private async keep(endpoint: EndpointRecord, id: string, at: number, body: string): Promise<void> {
    const { redis, keepMs } = this.o;
    const key = hookKeys.message(endpoint.tenant, endpoint.id, id);
    const messages = hookKeys.messages(endpoint.tenant, endpoint.id);
    await Promise.all([
      redis.set(key, body, 'PX', keepMs),
      redis.zadd(messages, at, id),
      redis.zremrangebyscore(messages, '-inf', at - keepMs),
    ]);
  }

  /** A task that ended (or is gone) with nothing left to relay leaves the relay's index. */
  private async close(tenant: string, id: string): Promise<void> {
    await dropOutbox(this.o.redis, id);
    const endpoints = await this.o.endpoints.list(tenant);
    if (endpoints.length > 0)
      await this.o.redis.hdel(hookKeys.last(tenant), ...endpoints.map((e) => `${e.id}/${id}`));
    await this.o.redis.zrem(hookKeys.open(tenant), id);
  }

  shutdown(): Promise<void> {
    return this.queues.close();
  }
}
