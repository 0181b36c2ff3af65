// The BullMQ worker a task worker takes its jobs with: each job starts as soon as it is taken.
import { Worker, type Job } from 'bullmq';

/**
 * @internal A BullMQ `Worker` that starts each job it takes before it takes the next. BullMQ 6's
 * main loop, at a concurrency above one, goes on fetching while its last fetch took a job, and
 * starts none until a fetch finds the queue empty or the concurrency is reached. So a job that
 * wakes a fetcher which has run jobs before waited for one more round trip (a fetch that finds
 * nothing) before its claim, in every such task's time to first token; and a burst of 16 jobs on
 * a fetcher of 16 slots was taken in 16 round trips (each `moveToActive` a durable write) before
 * its first task was claimed. Here the fetch that follows one that took a job answers "none"
 * without asking Redis, which makes the loop start the job it has; its next fetch asks Redis as
 * before. Jobs are taken in as many round trips as before, each started once taken.
 *
 * `moveToActive` is BullMQ's protected step of every fetch; packages/task-worker/test/fetcher.test.ts
 * fails should a BullMQ upgrade change the loop around it.
 */
export class Fetcher<T> extends Worker<T> {
  /** Whether the last fetch took a job that the loop has not yet been sent on to start. */
  private took = false;

  protected override async moveToActive(token: string, name?: string): Promise<Job<T>> {
    if (this.took) {
      this.took = false;
      return undefined as unknown as Job<T>; // BullMQ's "no job" (its own moveToActive returns it too)
    }
    const job = await super.moveToActive(token, name);
    this.took = job !== undefined;
    return job;
  }
}
