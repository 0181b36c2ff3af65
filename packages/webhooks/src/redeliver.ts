/**
 * Manual redelivery (the tenant's REST call, an operator in the console): a kept message queued
 * again under a new job with the same `webhook-id`, outside its task's order.
 */
import type { Redis } from 'ioredis';
import { hookKeys } from './keys.js';
import { EndpointQueues, type DeliveryJob } from './queues.js';
import type { RetrySchedule } from './schedule.js';

export class Redeliveries {
  private readonly queues: EndpointQueues;

  constructor(
    private readonly redis: Redis,
    private readonly schedule: RetrySchedule,
    queueRedis: Redis = redis,
  ) {
    this.queues = new EndpointQueues(queueRedis);
  }

  /** Queues one kept message again; false once it is no longer kept (TASKLINE_WEBHOOK_KEEP_S). */
  async one(tenant: string, endpoint: string, message: string): Promise<boolean> {
    const body = await this.redis.get(hookKeys.message(tenant, endpoint, message));
    if (body === null) return false;
    const job: DeliveryJob = { tenant, endpoint, message, body, after: null };
    await this.queues.of(endpoint).add('redeliver', job, {
      jobId: `${message}_r${Date.now()}`,
      ...this.schedule.jobOptions(),
    });
    return true;
  }

  /** Queues again every kept message of an endpoint written in [since, until] (ms); returns how many. */
  async range(tenant: string, endpoint: string, since: number, until: number): Promise<number> {
    const messages = await this.redis.zrangebyscore(hookKeys.messages(tenant, endpoint), since, until);
    let queued = 0;
    for (const message of messages) if (await this.one(tenant, endpoint, message)) queued++;
    return queued;
  }

  close(): Promise<void> {
    return this.queues.close();
  }
}
