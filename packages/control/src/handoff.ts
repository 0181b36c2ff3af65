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

/** One BullMQ queue per model, each on a connection `connect` opens for it when first used. */
export class JobQueues {
  private readonly queues = new Map<string, { queue: Queue; connection: Redis }>();

  constructor(private readonly connect: (model: string) => Redis) {}

  /** The model's queue, opened on first use. */
  queue(model: string): Queue {
    let q = this.queues.get(model);
    if (!q) {
      const connection = this.connect(model);
      q = {
        queue: new Queue(modelQueueName(model), {
          connection: connection as never,
          prefix: queuePrefix(model),
        }),
        connection,
      };
      this.queues.set(model, q);
    }
    return q.queue;
  }

  /** Models whose queue is open, with it. */
  opened(): [string, Queue][] {
    return [...this.queues].map(([model, q]) => [model, q.queue]);
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
    await Promise.all(
      [...this.queues.values()].map(async (q) => {
        await q.queue.close();
        q.connection.disconnect();
      }),
    );
    this.queues.clear();
  }
}
