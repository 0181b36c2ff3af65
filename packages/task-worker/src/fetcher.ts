// The BullMQ worker a task worker takes its jobs with: each job starts as soon as it is taken.
import { Worker, type Job } from 'bullmq';

/**
 * @internal A BullMQ `Worker` that starts each job it takes before it takes the next. BullMQ 6's
 * main loop, at a concurrency above one, goes on fetching while its last fetch took a job, and
 * starts none until a fetch finds the queue empty or the concurrency is reached. So a job that
 * wakes a fetcher which has run jobs before waited for one more round trip (a fetch that finds
 * nothing) before its claim, in every such task's time to first token; and a burst of 16 jobs on
 * a fetcher of 16 slots was taken in 16 round trips (each `moveToActive` a durable write) before
 * its first task was claimed. Here a fetch made while a job this fetcher took waits to be started
 * answers "none" without asking Redis, which makes the loop start that job; once it has, fetches
 * ask Redis as before. Jobs are taken in as many round trips as before, each started once taken.
 * (Only then: a fetch that follows a blocking wait must ask, or the job that ended the wait would
 * stay queued until the next idle poll, its wake-up spent.)
 *
 * `moveToActive` (every fetch's step) and `processJob` (every job's start) are BullMQ's protected
 * and public faces; packages/task-worker/test/fetcher.test.ts fails should a BullMQ upgrade change
 * the loop around them.
 */
export class Fetcher<T> extends Worker<T> {
  /** Ids of the jobs this fetcher's own fetches took that the loop has not yet started. */
  private readonly unstarted = new Set<string>();

  protected override async moveToActive(token: string, name?: string): Promise<Job<T>> {
    if (this.unstarted.size > 0) return undefined as unknown as Job<T>; // BullMQ's own "no job"
    const job = await super.moveToActive(token, name);
    if (job?.id !== undefined) this.unstarted.add(job.id);
    return job;
  }

  override processJob(job: Job<T>, token: string, fetchNextCallback?: () => boolean) {
    if (job.id !== undefined) this.unstarted.delete(job.id);
    return super.processJob(job, token, fetchNextCallback);
  }
}
