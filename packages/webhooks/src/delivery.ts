/**
 * The delivery worker: one BullMQ worker per enabled endpoint (so a slow or failing endpoint
 * holds only its own queue), each attempt signed with the endpoint's current secrets, logged,
 * and retried on the documented schedule; an endpoint failing `disableAfter` attempts in a row
 * is disabled and its tenant told.
 */
import type { Redis } from 'ioredis';
import { DelayedError, Job, Queue, Worker } from 'bullmq';
import type { Logger } from '@taskline/log';
import { ATTR, contextOf, inSpan, SpanKind } from '@taskline/tracing';
import { EndpointError, type EndpointRecord, type EndpointStore } from './endpoints.js';
import { endpointQueue, endpointQueuePrefix, hookKeys } from './keys.js';
import type { DeliveryJob } from './queues.js';
import type { RetrySchedule } from './schedule.js';
import { send, type AttemptResult, type SendLimits } from './send.js';
import { webhookHeaders } from './sign.js';

export interface DeliveryOptions {
  redis: Redis;
  /** Opens a connection for one BullMQ worker (`connectQueueRedis`). */
  connect: () => Redis;
  endpoints: EndpointStore;
  schedule: RetrySchedule;
  limits: SendLimits;
  logger: Logger;
  /** Concurrent attempts per endpoint (TASKLINE_WEBHOOK_CONCURRENCY). */
  concurrency: number;
  /** Failed attempts in a row that disable an endpoint (TASKLINE_WEBHOOK_DISABLE_AFTER). */
  disableAfter: number;
  /** Told when an endpoint is disabled for failing (a metric, the api's notice). */
  onDisabled?: (endpoint: EndpointRecord) => void;
  /** Told of every attempt (a metric). */
  onAttempt?: (endpoint: EndpointRecord, result: AttemptResult) => void;
}

/** Attempts kept per endpoint for the delivery log. */
const ATTEMPTS_KEPT = 200;
/** How soon a message waiting for the one before it about the same task looks again. */
const ORDER_WAIT_MS = 200;
/** A running attempt's BullMQ lock (renewed at half of it) and how often stalled jobs are looked for. */
const LOCK_MS = 10_000;
const STALLED_CHECK_MS = 5_000;
/** How soon a job of a disabled endpoint looks again (it is re-enabled by a PATCH). */
const DISABLED_WAIT_MS = 5000;

/**
 * One delivery attempt (the POST) as a client span of its task's trace, under the task's stored
 * context the job carries; untraced when it carries none (tracing off, or a redelivery).
 */
function traceDelivery(
  d: DeliveryJob,
  attempt: number,
  post: () => Promise<AttemptResult>,
): Promise<AttemptResult> {
  if (!d.traceparent) return post();
  const attributes = {
    [ATTR.tenant]: d.tenant,
    'taskline.webhook.endpoint': d.endpoint,
    'taskline.webhook.message': d.message,
    'taskline.webhook.attempt': attempt,
  };
  return inSpan(
    'webhook.delivery',
    { parent: contextOf(d.traceparent), kind: SpanKind.CLIENT, attributes },
    async (span) => {
      const result = await post();
      if (result.status !== null) span.setAttribute('http.response.status_code', result.status);
      span.setAttribute(ATTR.outcome, result.ok ? 'ok' : 'failed');
      return result;
    },
  );
}

/**
 * Null for an endpoint that was deleted; any other failure to read it (Redis unavailable) fails
 * the attempt, which is retried: taken for a deletion, it would complete the job undelivered.
 */
function deletedOnly(err: unknown): null {
  if (err instanceof EndpointError && err.code === 'webhook_not_found') return null;
  throw err;
}

export class DeliveryWorkers {
  private readonly workers = new Map<
    string,
    { worker: Worker<DeliveryJob>; queue: Queue<DeliveryJob>; connection: Redis }
  >();

  /** Refreshes in flight, which a shutdown waits for: a worker one started after it would be left running. */
  private readonly refreshing = new Set<Promise<void>>();
  private closed = false;

  constructor(private readonly o: DeliveryOptions) {}

  /** Starts workers for enabled endpoints and stops those of endpoints deleted or disabled. */
  refresh(): Promise<void> {
    if (this.closed) return Promise.resolve();
    const run = this.reconcile().finally(() => this.refreshing.delete(run));
    this.refreshing.add(run);
    return run;
  }

  /**
   * A tenant whose endpoints cannot be read holds up no other's new workers; while any cannot, no
   * worker stops (its endpoints may still be enabled), and the first failure is thrown after.
   */
  private async reconcile(): Promise<void> {
    const enabled = new Set<string>();
    const failures: unknown[] = [];
    for (const tenant of await this.o.redis.smembers(hookKeys.tenants)) {
      try {
        for (const endpoint of await this.o.endpoints.list(tenant))
          if (endpoint.enabled) enabled.add(endpoint.id);
      } catch (err) {
        failures.push(err);
      }
    }
    if (this.closed) return;
    for (const id of enabled) if (!this.workers.has(id)) this.start(id);
    if (failures.length > 0) throw failures[0];
    await Promise.all([...this.workers.keys()].filter((id) => !enabled.has(id)).map((id) => this.stop(id)));
  }

  private start(endpoint: string): void {
    const connection = this.o.connect();
    const worker = new Worker<DeliveryJob>(
      endpointQueue(endpoint),
      (job, token) => this.attempt(job, token),
      {
        connection: connection as never,
        prefix: endpointQueuePrefix(endpoint),
        concurrency: this.o.concurrency,
        settings: { backoffStrategy: (made: number) => this.o.schedule.delay(made) },
        // An attempt in flight when its worker dies is taken up again within about 15 s (its lock,
        // renewed while it runs, lapses; the stalled check finds it), and a crash never fails it.
        lockDuration: LOCK_MS,
        stalledInterval: STALLED_CHECK_MS,
        maxStalledCount: Number.MAX_SAFE_INTEGER,
      },
    );
    worker.on('error', (err) => this.o.logger.warn('webhook_worker_error', { endpoint, err }));
    const queue = new Queue<DeliveryJob>(endpointQueue(endpoint), {
      connection: connection as never,
      prefix: endpointQueuePrefix(endpoint),
    });
    this.workers.set(endpoint, { worker, queue, connection });
  }

  private async stop(endpoint: string): Promise<void> {
    const held = this.workers.get(endpoint);
    this.workers.delete(endpoint);
    await held?.worker.close();
    await held?.queue.close();
    held?.connection.disconnect();
  }

  async shutdown(): Promise<void> {
    this.closed = true;
    await Promise.allSettled(this.refreshing);
    await Promise.all([...this.workers.keys()].map((id) => this.stop(id)));
  }

  /** One attempt of one job: waits its turn behind the task's previous message, then POSTs. */
  private async attempt(job: Job<DeliveryJob>, token?: string): Promise<void> {
    const d = job.data;
    const endpoint = await this.o.endpoints.get(d.tenant, d.endpoint).catch(deletedOnly);
    if (!endpoint) return; // deleted: nothing to deliver to
    // Disabled (its worker stops at the next refresh): the job waits, no attempt spent.
    if (!endpoint.enabled) return this.later(job, DISABLED_WAIT_MS, token);
    if (d.after && !(await this.settled(d.endpoint, d.after))) return this.later(job, ORDER_WAIT_MS, token);
    const timestampS = Math.floor(Date.now() / 1000);
    const headers = webhookHeaders(this.o.endpoints.signing(endpoint), d.message, timestampS, d.body);
    const attempt = job.attemptsMade + 1;
    const result = await traceDelivery(d, attempt, () => send(endpoint.url, headers, d.body, this.o.limits));
    await this.log(endpoint, d.message, attempt, result);
    if (result.ok) {
      await this.o.redis.hdel(hookKeys.failures(d.tenant), d.endpoint);
      return;
    }
    await this.failed(endpoint);
    throw new Error(`webhook attempt failed: ${result.status ?? result.response}`);
  }

  /** Puts the job back for `ms` without counting an attempt. */
  private async later(job: Job<DeliveryJob>, ms: number, token?: string): Promise<never> {
    await job.moveToDelayed(Date.now() + ms, token);
    throw new DelayedError();
  }

  /** Whether the job before this one was delivered, given up or is gone (expired): its turn passed. */
  private async settled(endpoint: string, jobId: string): Promise<boolean> {
    const queue = this.workers.get(endpoint)?.queue;
    const before = queue && (await Job.fromId(queue, jobId));
    if (!before) return true;
    const state = await before.getState();
    return state === 'completed' || state === 'failed' || state === 'unknown';
  }

  private async log(endpoint: EndpointRecord, message: string, attempt: number, result: AttemptResult) {
    const key = hookKeys.attempts(endpoint.tenant, endpoint.id);
    const entry = { message, attempt, at: Date.now(), ...result };
    await this.o.redis.lpush(key, JSON.stringify(entry));
    await this.o.redis.ltrim(key, 0, ATTEMPTS_KEPT - 1);
    this.o.onAttempt?.(endpoint, result);
    this.o.logger.info('webhook_attempt', {
      tenant: endpoint.tenant,
      endpoint: endpoint.id,
      message,
      attempt,
      status: result.status,
      latency_ms: result.latencyMs,
    });
  }

  /** Counts a failed attempt; disables the endpoint at `disableAfter` in a row. */
  private async failed(endpoint: EndpointRecord): Promise<void> {
    const inRow = await this.o.redis.hincrby(hookKeys.failures(endpoint.tenant), endpoint.id, 1);
    if (inRow < this.o.disableAfter) return;
    // Attempts in flight beside this one fail past the threshold too: one of them disables it.
    if (!(await this.o.endpoints.disableFailing(endpoint.tenant, endpoint.id, inRow))) return;
    this.o.logger.warn('webhook_endpoint_disabled', {
      tenant: endpoint.tenant,
      endpoint: endpoint.id,
      failures: inRow,
    });
    this.o.onDisabled?.(endpoint);
  }
}
