/** The BullMQ queue of each endpoint a process adds jobs to (the relay, redeliveries), opened once. */
import type { Redis } from 'ioredis';
import { Queue } from 'bullmq';
import { endpointQueue, endpointQueuePrefix } from './keys.js';

/** What a delivery job carries: everything an attempt needs but the endpoint's current secrets. */
export interface DeliveryJob {
  tenant: string;
  endpoint: string;
  /** The `webhook-id`: the same on every attempt and redelivery. */
  message: string;
  body: string;
  /** The job of this endpoint's previous message about the same task: delivered (or given up) first. */
  after: string | null;
  /** The task's stored trace context, when traced: each attempt is a span of the task's trace. */
  traceparent?: string;
}

export class EndpointQueues {
  private readonly queues = new Map<string, Queue<DeliveryJob>>();

  constructor(private readonly connection: Redis) {}

  of(endpoint: string): Queue<DeliveryJob> {
    let queue = this.queues.get(endpoint);
    if (!queue) {
      queue = new Queue<DeliveryJob>(endpointQueue(endpoint), {
        connection: this.connection as never,
        prefix: endpointQueuePrefix(endpoint),
      });
      this.queues.set(endpoint, queue);
    }
    return queue;
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close()));
    this.queues.clear();
  }
}
