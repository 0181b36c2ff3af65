// The one admission path of every surface: admit, create the task, wait for its end, cancel on leave.
import type { ServerResponse } from 'node:http';
import {
  isFinalEventType,
  markUnconfirmedCreate,
  TasklineError,
  type CallHolds,
  type EventHub,
  type StoredEvent,
  type Subscription,
  type TaskRecord,
  type TaskStore,
} from '@taskline/engine';
import type { Logger } from '@taskline/log';
import { ATTR, contextOf, inSpan, SpanKind, traceparentOf, type IncomingTrace } from '@taskline/tracing';
import type { TaskReservation, TenantLimits } from './limits.js';

export interface AdmissionDeps {
  store: TaskStore;
  hub: EventHub;
  /** Leases on the calls this replica holds (see cancelOnLeave). */
  holds: CallHolds;
  limits: TenantLimits;
  logger: Logger;
  /**
   * Asks now what the tenant's create will read (the webhook question, `WebhookWatch.warm`), so
   * that it travels beside the rate limit's round trip instead of after it. Unset: nothing asked.
   */
  warm?: (tenant: string) => void;
}

/** What a create wrote: the task, and whether an earlier try of the same create had made it. */
export interface Created {
  task: TaskRecord;
  replayed: boolean;
}

type TaskRef = Pick<TaskRecord, 'id' | 'tenant'>;

/**
 * The one admission path of every protocol surface (LMSP 1.0 and the OpenAI routes on it, MCP
 * 2026-07-28, MCP 2025-11-25): a request takes from its tenant's limits (`admit`), a task is
 * created under the place it holds (`create`), a caller that waits for the task's end does so
 * through `awaitEnd`, and a caller that leaves first cancels what nobody will read
 * (`cancelOnLeave`). Each surface only words the outcome in its own protocol.
 */
export class Admission {
  readonly limits: TenantLimits;
  /** Cancels that departed callers caused, still being written. */
  private readonly cancels = new Set<Promise<unknown>>();

  constructor(private readonly deps: AdmissionDeps) {
    this.limits = deps.limits;
  }

  /**
   * A request's admission step: one from the tenant's request rate and, for a request that
   * creates a task, a place under its unfinished-task cap, in the same script. The cap is only
   * checked by `create` (or earlier by `reservation.admit()`), so a create refused for its body
   * still gets its own error. The place is freed when the caller leaves (`res` closes) and no
   * task took it; listened for now, not once the place is held: a caller gone by then would
   * leave it for 60 s.
   */
  async admit(tenant: string, res: ServerResponse, creates: boolean): Promise<TaskReservation | null> {
    if (!creates) {
      await this.limits.takeRequest(tenant);
      return null;
    }
    this.deps.warm?.(tenant);
    const taking = this.limits.takeCreate(tenant);
    res.once('close', () => void taking.then((slot) => slot.commit(null)).catch(() => undefined));
    return taking;
  }

  /**
   * Creates a task under the caller's place (or one taken now): checks the cap (`rate_limited`
   * at it) and runs `write` with the id the place is held under and `alongside`, which `write`
   * hands to the store's create: it writes the place to disk in the create's own round trip
   * (`persist`: the request held it in memory only; a `write` that never calls it has it written
   * after). A task written under that id already holds its place; nothing is swapped after. A
   * task under another id (an idempotent create that took over an abandoned one) takes the place
   * over, not awaited: until then the place counts for it, and a failed swap leaves a place that
   * ages out; the task itself is already on disk. A create that made no new task (a replay) or
   * failed frees the place, unless Redis left it unconfirmed (see markUnconfirmedCreate): the task
   * may exist and run, so it keeps the place, which ages out if it does not (docs/lmsp.md, "A
   * create answered 503"). At the cap, `replay` may find the task an accepted earlier try of the
   * same create made: its retry gets it again.
   */
  async create(
    tenant: string,
    reservation: TaskReservation | null,
    write: (id: string, traceparent: string | undefined, alongside: () => unknown) => Promise<Created>,
    replay?: () => Promise<TaskRecord | null>,
    incoming: IncomingTrace = {},
  ): Promise<Created> {
    // The task's trace starts here (under the caller's, when it sent one); its traceparent is
    // stored on the record so every later span of the task joins this trace.
    const parent = contextOf(incoming.traceparent, incoming.tracestate);
    return inSpan(
      'task.create',
      { parent, kind: SpanKind.SERVER, attributes: { [ATTR.tenant]: tenant } },
      async (span) => {
        const created = await this.admitAndWrite(
          tenant,
          reservation,
          (id, alongside) => write(id, traceparentOf(span), alongside),
          replay,
        );
        span.setAttributes({ [ATTR.taskId]: created.task.id, [ATTR.model]: created.task.model });
        return created;
      },
    );
  }

  private async admitAndWrite(
    tenant: string,
    reservation: TaskReservation | null,
    write: (id: string, alongside: () => unknown) => Promise<Created>,
    replay?: () => Promise<TaskRecord | null>,
  ): Promise<Created> {
    const slot = reservation ?? (await this.limits.reserveTask(tenant));
    try {
      await inSpan('task.admission', {}, () => slot.admit());
    } catch (err) {
      const found = replay && err instanceof TasklineError ? await replay() : null;
      if (!found) throw err;
      await slot.commit(null).catch(() => undefined);
      return { task: found, replayed: true };
    }
    try {
      // The place goes to disk beside the create's own writes (one fsync on one Redis), not after.
      // Its failure is handled as it is sent: the create may still be on its way when it comes.
      let placed: Promise<void> | null = null;
      const persist = () =>
        (placed ??= slot
          .persist()
          .catch((err: unknown) =>
            this.deps.logger.warn('task reservation persist failed', { task: slot.taskId, err }),
          ));
      const created = await write(slot.taskId, persist).finally(persist);
      slot
        .commit(created.replayed ? null : created.task.id)
        .catch((err: unknown) =>
          this.deps.logger.warn('task reservation commit failed', { task: created.task.id, err }),
        );
      return created;
    } catch (err) {
      const mayExist = markUnconfirmedCreate(err, slot.taskId);
      await slot.commit(mayExist ? slot.taskId : null).catch(() => undefined);
      throw err;
    }
  }

  /**
   * Waits for the task's final event, read from the start of its log (an end already written
   * counts), on any replica's writes; returns the task as it ended (null once expired). Rejects
   * with the signal's reason when the caller leaves first. `onEvent` sees every event meanwhile.
   */
  async awaitEnd(
    task: TaskRef,
    signal: AbortSignal,
    onEvent?: (event: StoredEvent) => void,
  ): Promise<TaskRecord | null> {
    signal.throwIfAborted();
    let ended!: () => void;
    let left!: (reason: unknown) => void;
    const end = new Promise<void>((resolve, reject) => {
      ended = resolve;
      left = reject;
    });
    end.catch(() => undefined); // a departure while subscribing is awaited below
    const onAbort = () => left(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    let sub: Subscription | undefined;
    try {
      sub = await this.deps.hub.subscribe(task.id, 0, (event) => {
        onEvent?.(event);
        if (isFinalEventType(event.type)) ended();
      });
      await end;
    } finally {
      signal.removeEventListener('abort', onAbort);
      sub?.close();
    }
    return this.deps.store.get(task.id, task.tenant);
  }

  /**
   * Cancels the task when `signal` aborts (its caller left: nobody is left to read the result),
   * until the returned function is called. Meanwhile the call is leased (`CallHolds`): should this
   * replica go first, the scheduler cancels the task once the lease lapses. The cancel is tracked:
   * `settled` waits for it.
   */
  cancelOnLeave(task: TaskRef, signal: AbortSignal): () => void {
    const { store, holds, logger } = this.deps;
    const release = () =>
      holds
        .release(task.id)
        .catch((err: unknown) => logger.warn('call release failed', { task: task.id, err }));
    const cancel = () => {
      const p = store
        .cancel(task.id, task.tenant)
        .catch((err: unknown) => {
          if (!(err instanceof TasklineError && err.code === 'task_not_cancelable')) {
            logger.warn('cancel after disconnect failed', { task: task.id, err });
          }
        })
        .then(release)
        .finally(() => this.cancels.delete(p));
      this.cancels.add(p);
    };
    if (signal.aborted) {
      cancel();
      return () => undefined;
    }
    holds.hold(task.id).catch((err: unknown) => logger.warn('call hold failed', { task: task.id, err }));
    signal.addEventListener('abort', cancel, { once: true });
    return () => {
      if (signal.aborted) return;
      signal.removeEventListener('abort', cancel);
      void release();
    };
  }

  /** Settles once every cancel that a departed caller caused has been written. */
  async settled(): Promise<void> {
    while (this.cancels.size > 0) await Promise.allSettled([...this.cancels]);
  }
}

/** Aborts when the caller leaves before its HTTP response is complete (the signal `cancelOnLeave` takes). */
export function callerLeft(res: ServerResponse): AbortSignal {
  const left = new AbortController();
  // It may have left already, while the task was being written: its 'close' has passed.
  if (res.destroyed && !res.writableFinished) left.abort();
  else res.once('close', () => !res.writableFinished && left.abort());
  return left.signal;
}
