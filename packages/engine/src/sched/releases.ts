/**
 * The `{sched}` index removals and end counts of the tasks released in one turn of the event
 * loop, sent together: a worker whose finishes come back in one read of Redis's replies releases
 * them in one `ZREM` per index key and one count, instead of three commands a task.
 */
import type { Redis } from 'ioredis';
import { queueTenant } from '../keys.js';
import { countEnded, type TaskEnd } from '../operator-index.js';
import type { TaskRecord } from '../records.js';
import { schedulerKeys } from './keys.js';

interface Batch {
  leases: string[];
  /** Running-set key -> task ids. */
  active: Map<string, string[]>;
  failures: { tenant: string; code: string }[];
  sent: Promise<void>;
}

export class Releases {
  private batch: Batch | null = null;

  constructor(
    private readonly redis: Redis,
    private readonly now: () => number,
  ) {}

  /** Settles once the batch this release joined is written. */
  add(task: Pick<TaskRecord, 'id' | 'tenant' | 'parent'>, end: TaskEnd): Promise<void> {
    const batch = this.batch ?? this.open();
    batch.leases.push(task.id);
    const key = schedulerKeys.active(queueTenant(task));
    const ids = batch.active.get(key);
    if (ids) ids.push(task.id);
    else batch.active.set(key, [task.id]);
    if (end.failure !== undefined) batch.failures.push({ tenant: task.tenant, code: end.failure });
    return batch.sent;
  }

  private open(): Batch {
    const batch: Batch = { leases: [], active: new Map(), failures: [], sent: Promise.resolve() };
    // After this turn's I/O callbacks: every finish whose reply came in the same read has joined.
    batch.sent = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
      this.batch = null;
      return this.send(batch);
    });
    this.batch = batch;
    return batch;
  }

  private async send(batch: Batch): Promise<void> {
    // Independent removals, sent in one write (no MULTI: none needs another).
    await Promise.all([
      this.redis.zrem(schedulerKeys.leases, ...batch.leases),
      ...[...batch.active].map(([key, ids]) => this.redis.zrem(key, ...ids)),
      countEnded(this.redis, this.now(), batch.leases.length, batch.failures),
    ]);
  }
}
