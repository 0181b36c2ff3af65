/**
 * The BullMQ side of dispatch, shared by the scheduler (producer) and the workers (consumers).
 * One queue per model id: a task's model is its queue (MCP tool tasks are stored with the model
 * `tools`), as in the scheduler's ready index.
 */
export const TOOLS_MODEL = 'tools';

/** BullMQ queue names cannot hold `:`; model ids may, so they are encoded. */
export const modelQueueName = (model: string) =>
  `tl-model-${encodeURIComponent(model).replace(/%3A/gi, '%3a')}`;

/**
 * The prefix of a model's BullMQ keys, hash-tagged by the queue: every key of one queue shares a
 * slot, as BullMQ's scripts need on Redis Cluster (the default prefix `bull` has no tag: CROSSSLOT),
 * while different models' queues spread over the cluster's shards.
 */
export const queuePrefix = (model: string) => `bull:{${modelQueueName(model)}}`;

export interface DispatchJob {
  taskId: string;
  tenant: string;
  /** The task's attempt when dispatched: the next claim makes attempt + 1. */
  attempt: number;
  /** The W3C traceparent of the scheduler's hand-off span, when traced: the claim continues it. */
  traceparent?: string;
  /** The W3C traceparent of the task's previous attempt, when traced: the new attempt links to it. */
  previous?: string;
  /**
   * The task's record as its create wrote it, when the create dispatched it and it is small (the
   * engine's HandOff.record): its first attempt runs without reading it back.
   */
  record?: Record<string, string>;
}

/**
 * One job per queued state of a task: attempt and event sequence both change whenever the task
 * is queued again (a retry or resume after a crash or a drain), so re-dispatching the same state is a no-op in
 * BullMQ while a new queued state always gets a new job.
 */
export const dispatchJobId = (task: { id: string; attempt: number; seq: number }) =>
  `${task.id}-${task.attempt}-${task.seq}`;
