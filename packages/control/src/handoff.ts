// The hand-off of a dispatched task to its model's BullMQ queue, for whoever dispatches: the leader's rounds and the api's creates on lent slots.
import { contextOf, inSpan, SpanKind, taskAttributes, traceparentOf } from '@taskline/tracing';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { dispatchJobId, modelQueueName, queuePrefix, type DispatchJob } from './queues.js';

/** A dispatched task as its job names it: the queued state it was offered in. */
export interface Dispatched {
  id: string;
  /** The tenant it is indexed under (a tool task's child generations have a name of their own). */
  tenant: string;
  attempt: number;
  seq: number;
  /** The record its create wrote, to travel with the job (DispatchJob.record). */
  record?: Record<string, string>;
}

/** The task's stored trace contexts (W3C traceparents), when traced: its own and its last attempt's. */
export interface HandOffTraces {
  task?: string | null;
  attempt?: string | null;
}

/**
 * One BullMQ queue per model, all on the one connection `connect` opens when the first is used: a
 * queue sends no blocking command, so a process that hands tasks to many models (every worker
 * tool is one) holds one connection for them, not one each.
 */
export class JobQueues {
  private readonly queues = new Map<string, Queue>();
  private connection: Redis | null = null;

  constructor(private readonly connect: () => Redis) {}

  /** The model's queue, opened on first use. */
  queue(model: string): Queue {
    let queue = this.queues.get(model);
    if (!queue) {
      this.connection ??= this.connect();
      queue = new Queue(modelQueueName(model), {
        connection: this.connection as never,
        prefix: queuePrefix(model),
      });
      this.queues.set(model, queue);
    }
    return queue;
  }

  /** Models whose queue is open, with it. */
  opened(): [string, Queue][] {
    return [...this.queues];
  }

  /**
   * Queues a dispatched task's job, named after the queued state it was offered in: a task
   * cancelled meanwhile gets a job all the same, and the worker's claim refuses it. Traced (the
   * task has a stored context), as the dispatch and hand-off spans of its trace; the job carries
   * the hand-off's context and the previous attempt's.
   */
  async handOff(model: string, task: Dispatched, traces?: HandOffTraces): Promise<void> {
    if (!traces?.task) return this.add(model, task);
    const attributes = taskAttributes({ id: task.id, tenant: task.tenant, model, attempt: task.attempt + 1 });
    const previous = traces.attempt ?? undefined;
    return inSpan('task.dispatch', { parent: contextOf(traces.task), attributes }, () =>
      inSpan('task.handoff', { kind: SpanKind.PRODUCER, attributes }, (span) =>
        this.add(model, task, { traceparent: traceparentOf(span), previous }),
      ),
    );
  }

  private async add(
    model: string,
    task: Dispatched,
    trace: { traceparent?: string; previous?: string } = {},
  ): Promise<void> {
    const job: DispatchJob = {
      taskId: task.id,
      tenant: task.tenant,
      attempt: task.attempt,
      ...trace,
      ...(task.record && { record: task.record }),
    };
    await this.queue(model).add('run', job, {
      jobId: dispatchJobId(task),
      removeOnComplete: true,
      removeOnFail: true,
    });
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((queue) => queue.close()));
    this.queues.clear();
    this.connection?.disconnect();
    this.connection = null;
  }
}
