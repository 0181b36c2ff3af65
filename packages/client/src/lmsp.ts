// The LMSP 1.0 client: create, poll, stream with resume, answer, cancel.
import { randomUUID } from 'node:crypto';
import { createParser } from 'eventsource-parser';
import { abortError, TasklineClientError } from './errors.js';
import { problemOf, requestJson, send, transport, type Transport, type TransportOptions } from './http.js';
import type { components } from './lmsp-schema.js';
import { DEFAULT_POLL, nextPollDelay, type PollPolicy } from './poll.js';
import { credentialId, patchTracked, type TaskIdStore, type TaskScope, type TrackedTask } from './store.js';

/** The LMSP types, generated from the server's OpenAPI document (`pnpm --filter @taskline/client types`). */
export type CreateTaskRequest = components['schemas']['CreateTaskRequest'];
export type ResponseRequest = components['schemas']['ResponseRequest'];
export type Task = components['schemas']['Task'];
export type TaskStatus = Task['status'];
export type ResponseObject = components['schemas']['Response'];
export type StreamEvent = components['schemas']['StreamEvent'] & Record<string, unknown>;
export type Capabilities = components['schemas']['Capabilities'];
export type Problem = components['schemas']['Problem'];

export const LMSP_PREFIX = '/lmsp/v1';
export const TERMINAL_STATUSES: readonly TaskStatus[] = ['succeeded', 'failed', 'cancelled'];
export const FINAL_EVENT_TYPES = [
  'response.completed',
  'response.incomplete',
  'response.failed',
  'response.cancelled',
] as const;

/**
 * Sent once each time a task with `on_restart: "retry"` starts over (after a crash or a drain):
 * what the events before it built is void, and the events after it alone make the response.
 */
export const RESTART_EVENT_TYPE = 'response.restarted';

export const isTerminalStatus = (s: string): boolean => (TERMINAL_STATUSES as readonly string[]).includes(s);
export const isFinalEvent = (type: string): boolean =>
  (FINAL_EVENT_TYPES as readonly string[]).includes(type);

export interface LmspClientOptions extends TransportOptions {
  /** The server's origin, e.g. `http://127.0.0.1:8080` (the `/lmsp/v1` prefix is added). */
  baseUrl: string;
  /** Where created task ids are written before the create is sent; omit to keep nothing. */
  store?: TaskIdStore;
  poll?: Partial<PollPolicy>;
  /**
   * Connections in a row that bring neither an event nor a heartbeat before `stream()` gives up
   * (default 30). One that lived to a heartbeat is healthy, only quiet (a queued task behind a
   * proxy that ends long streams), and never counts.
   */
  maxStreamReconnects?: number;
}

/**
 * What a cancel achieved. LMSP answers at once, but a running task only stops when its worker
 * does: `cancellation_requested` until a terminal status says otherwise.
 */
export interface CancelOutcome {
  task: Task;
  state: 'cancellation_requested' | 'cancelled';
}

export interface WaitOptions {
  signal?: AbortSignal;
  /** Called with every task object that differs from the last one seen. */
  onUpdate?: (task: Task) => void;
}

/** LMSP 1.0 tasks: create, get, cancel, resumable event streams and polite polling. */
export class LmspClient {
  private readonly t: Transport;
  private readonly base: string;
  private readonly poll: PollPolicy;
  /** Whose entries of the store this client reads and writes. */
  readonly scope: TaskScope;
  /** task id -> store key, for the tasks this client created or resumed. */
  private readonly tracked = new Map<string, string>();

  constructor(private readonly o: LmspClientOptions) {
    this.t = transport(o);
    this.base = o.baseUrl.replace(/\/+$/, '');
    this.poll = { ...DEFAULT_POLL, ...o.poll };
    this.scope = { endpoint: this.base, credential: credentialId(o.apiKey, o.jwtTenantClaim) };
  }

  get endpoint(): string {
    return this.base;
  }

  private url(path: string): string {
    return `${this.base}${LMSP_PREFIX}${path}`;
  }

  private get<T>(path: string, signal?: AbortSignal): Promise<T> {
    return requestJson<T>(this.t, this.url(path), {
      method: 'GET',
      headers: this.t.headers({ accept: 'application/json' }),
      signal,
      idempotent: true,
    }).then((r) => r.body);
  }

  capabilities(signal?: AbortSignal): Promise<Capabilities> {
    return this.get('/capabilities', signal);
  }

  /**
   * Creates a task. Every create carries an `Idempotency-Key` (one is made if none is given) and
   * is retried with that same key, so a lost reply never makes a second task. With a store, the
   * key and body are written first: `resume()` after a crash finishes the create. A create the
   * server refuses for good leaves nothing to resume, and never replaces the entry of a key
   * reused while its first task is unfinished.
   */
  async createTask(
    body: CreateTaskRequest,
    opts: { idempotencyKey?: string; signal?: AbortSignal } = {},
  ): Promise<Task> {
    const key = opts.idempotencyKey ?? `tl-${randomUUID()}`;
    const store = this.o.store;
    const now = this.t.clock.now();
    const previous = store ? await store.get(key, this.scope) : null;
    const fresh: TrackedTask = {
      key,
      protocol: 'lmsp',
      ...this.scope,
      taskId: null,
      request: body,
      status: 'creating',
      lastEventId: 0,
      done: false,
      createdAt: now,
      updatedAt: now,
    };
    // An unfinished entry under this key tracks a task (or a create not answered yet): the server
    // answers this create with that same task or refuses it, so the entry stays as it is.
    const replaces = !previous || previous.done;
    if (replaces) await store?.put(fresh);
    try {
      return await this.sendCreate(key, body, opts.signal);
    } catch (err) {
      // Nothing was created: a finished entry that was there comes back, a new one is closed, so
      // `resume()` never sends this create again.
      if (store && replaces && err instanceof TasklineClientError && err.refusedForGood)
        await store.put(previous ?? { ...fresh, status: 'refused', done: true });
      throw err;
    }
  }

  private async sendCreate(key: string, body: unknown, signal?: AbortSignal): Promise<Task> {
    const { body: task } = await requestJson<Task>(this.t, this.url('/tasks'), {
      method: 'POST',
      headers: this.t.headers({ 'content-type': 'application/json', 'idempotency-key': key }),
      body: JSON.stringify(body),
      signal,
      idempotent: true,
    });
    this.tracked.set(task.id, key);
    await this.record(task.id, { taskId: task.id, status: task.status, done: isTerminalStatus(task.status) });
    return task;
  }

  private async record(taskId: string, patch: Partial<TrackedTask>): Promise<void> {
    const key = this.tracked.get(taskId);
    if (key && this.o.store) await patchTracked(this.o.store, key, this.scope, patch, this.t.clock.now());
  }

  async getTask(id: string, signal?: AbortSignal): Promise<Task> {
    const task = await this.get<Task>(`/tasks/${encodeURIComponent(id)}`, signal);
    await this.record(id, { status: task.status, done: isTerminalStatus(task.status) });
    return task;
  }

  /** Asks for a cancel (idempotent, so retried freely); see `CancelOutcome` for what it means. */
  async cancelTask(id: string, signal?: AbortSignal): Promise<CancelOutcome> {
    const { body: task } = await requestJson<Task>(
      this.t,
      this.url(`/tasks/${encodeURIComponent(id)}/cancel`),
      {
        method: 'POST',
        headers: this.t.headers({ accept: 'application/json' }),
        signal,
        idempotent: true,
      },
    );
    await this.record(id, { status: task.status, done: isTerminalStatus(task.status) });
    return { task, state: task.status === 'cancelled' ? 'cancelled' : 'cancellation_requested' };
  }

  /**
   * Polls until the task is terminal: never sooner than the poll interval, 10-20 % jitter on
   * every wait, backing off while the task does not change.
   */
  async wait(id: string, opts: WaitOptions = {}): Promise<Task> {
    let unchanged = 0;
    let last = '';
    for (;;) {
      const task = await this.getTask(id, opts.signal);
      const seen = `${task.status}:${task.updated_at}`;
      if (seen !== last) {
        last = seen;
        unchanged = 0;
        opts.onUpdate?.(task);
      } else unchanged++;
      if (isTerminalStatus(task.status)) return task;
      await this.t.clock.sleep(nextPollDelay(this.poll, unchanged, this.t.random()), opts.signal);
    }
  }

  /**
   * The task's events, in order, each once, ending after the final event. A dropped connection,
   * a replica that goes away or a server-side close is resumed with `Last-Event-ID` (honouring
   * the server's `retry:` hint), on whichever replica answers. `after` starts past an event
   * already seen; for a tracked task the stored position is the default.
   */
  async *stream(
    id: string,
    opts: { after?: number; signal?: AbortSignal } = {},
  ): AsyncGenerator<StreamEvent> {
    let after = opts.after ?? (await this.storedPosition(id));
    let idle = 0;
    let endedSeen = false;
    const limit = this.o.maxStreamReconnects ?? 30;
    for (;;) {
      let retryMs: number | undefined;
      let failure: unknown;
      let progressed = false;
      let alive = false;
      let ended = false;
      try {
        const res = await send(this.t, this.url(`/tasks/${encodeURIComponent(id)}/events`), {
          method: 'GET',
          headers: this.t.headers({
            accept: 'text/event-stream',
            ...(after > 0 ? { 'last-event-id': String(after) } : {}),
          }),
          signal: opts.signal,
        });
        if (!res.ok) throw await problemOf(res);
        // The resume point was the final event: nothing follows it.
        if (res.status === 204) return;
        const pending: StreamEvent[] = [];
        const parser = eventParser(id, pending, {
          onRetry: (ms) => (retryMs = ms),
          onComment: () => (alive = true),
        });
        const decoder = new TextDecoder();
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          parser.feed(decoder.decode(chunk, { stream: true }));
          for (const event of pending.splice(0)) {
            // A replayed event (seen before the reconnect) is dropped: each event reaches the caller once.
            if (event.sequence_number <= after) continue;
            after = event.sequence_number;
            progressed = true;
            ended = isFinalEvent(event.type);
            try {
              yield event;
            } finally {
              // Also when the caller stops at this event (break, return): it has it, so a later
              // stream() starts after it. A crash runs no finally: that event comes again.
              await this.record(id, {
                lastEventId: after,
                status: event.task_status ?? 'running',
                ...(ended && { done: true }),
              });
            }
            if (ended) break;
          }
          if (ended) break;
        }
      } catch (err) {
        if (opts.signal?.aborted) throw abortError();
        // What another try cannot fix (404, 410, 401) ends the stream; anything else, a body cut
        // off mid-read included, is a disconnect to resume from.
        if (err instanceof TasklineClientError && !err.retryable) throw err;
        failure = err;
      }
      if (ended) return;
      // The stream closed before a final event.
      if (!progressed) {
        if (alive) idle = 0;
        else if (++idle > limit)
          throw new TasklineClientError(
            'network_error',
            `The event stream of ${id} keeps failing; giving up.`,
          );
        // A task that has ended sends what is left on the next connection, at once: its last
        // events, or 204 once its final one was delivered. Never taken as delivered here: this
        // connection may have closed before the task's last events were written. (At once only
        // the first time: a server that keeps closing such streams is tried at the usual pace.)
        if (!endedSeen && (endedSeen = await this.hasEnded(id, opts.signal))) continue;
      } else idle = 0;
      await this.t.clock.sleep(this.reconnectDelay(retryMs, failure, idle), opts.signal);
    }
  }

  /** Whether the task has ended (a read that fails as a try-again answers no). */
  private async hasEnded(id: string, signal: AbortSignal | undefined): Promise<boolean> {
    const task = await this.getTask(id, signal).catch((err: unknown) => {
      if (err instanceof TasklineClientError && !err.retryable) throw err;
      return null;
    });
    return task !== null && isTerminalStatus(task.status);
  }

  /**
   * A refusal's Retry-After wins over the stream's `retry:` hint; a hint past the longest wait
   * is cut to it (a reconnect delay is the client's to choose), a Retry-After past it gives up.
   */
  private reconnectDelay(retryMs: number | undefined, failure: unknown, idle: number): number {
    const refusedFor = (failure as { retryAfterS?: number } | undefined)?.retryAfterS;
    return retryMs === undefined || refusedFor !== undefined
      ? this.t.retryDelay(Math.max(1, idle), failure)
      : Math.min(retryMs, this.t.maxRetryAfterS * 1000);
  }

  private async storedPosition(id: string): Promise<number> {
    const key = this.tracked.get(id);
    const entry = key && this.o.store ? await this.o.store.get(key, this.scope) : null;
    return entry?.lastEventId ?? 0;
  }

  /**
   * The LMSP tasks in the store that did not end, each with its task: a create that never got its
   * reply is sent again under its Idempotency-Key (the same task comes back, never a second one).
   * Follow each with `stream()` or `wait()`; the stored `lastEventId` is where `stream()` resumes.
   * A create the server refuses for good is marked done and comes back with its `error` instead,
   * so one such entry never stops the others from being followed.
   */
  async resume(signal?: AbortSignal): Promise<ResumedTask[]> {
    const store = this.o.store;
    if (!store) return [];
    /** An entry with nothing left to follow: its task is gone, or its create can never succeed. */
    const close = (key: string, status: string) =>
      patchTracked(store, key, this.scope, { done: true, status }, this.t.clock.now());
    const out: ResumedTask[] = [];
    for (const entry of await store.unfinished(this.scope)) {
      if (entry.protocol !== 'lmsp') continue;
      let task: Task;
      if (entry.taskId) {
        this.tracked.set(entry.taskId, entry.key);
        try {
          task = await this.getTask(entry.taskId, signal);
        } catch (err) {
          // Expired or deleted on the server: nothing left to wait for.
          if (err instanceof TasklineClientError && err.code === 'task_not_found') {
            await close(entry.key, 'not_found');
            continue;
          }
          throw err;
        }
      } else {
        try {
          task = await this.sendCreate(entry.key, entry.request, signal);
        } catch (err) {
          if (!(err instanceof TasklineClientError && err.refusedForGood)) throw err;
          await close(entry.key, 'refused');
          out.push({ entry, error: err });
          continue;
        }
      }
      out.push({ entry: { ...entry, taskId: task.id }, task });
    }
    return out;
  }
}

/** What `resume()` found for one unfinished entry: its task, or why its create can never succeed. */
export type ResumedTask =
  | { entry: TrackedTask; task: Task; error?: undefined }
  | { entry: TrackedTask; task?: undefined; error: TasklineClientError };

/**
 * The response text a task's events add up to, honouring restarts: feed it every event of
 * `stream()` in order; a `response.restarted` event drops what came before it, so `text` equals
 * the final response's text once the stream ends, however often a `retry` task started over.
 */
export class TextAssembler {
  text = '';
  /** Restarts seen so far. */
  restarts = 0;

  /** Takes one event; returns the text it appends (`''` for none). */
  push(event: StreamEvent): string {
    if (event.type === RESTART_EVENT_TYPE) {
      this.text = '';
      this.restarts++;
      return '';
    }
    if (event.type !== 'response.output_text.delta' || typeof event.delta !== 'string') return '';
    this.text += event.delta;
    return event.delta;
  }
}

/** The text of a finished response, or of the deltas seen so far. */
export function responseText(response: ResponseObject | null | undefined): string {
  return (response?.output ?? [])
    .flatMap((item) => item.content)
    .map((part) => part.text)
    .join('');
}

/** Parses a task's SSE stream into `pending`; a frame that is not JSON is a protocol error. */
function eventParser(
  id: string,
  pending: StreamEvent[],
  hints: { onRetry(ms: number): void; onComment(): void },
) {
  return createParser({
    onEvent: (e) => {
      try {
        pending.push(JSON.parse(e.data) as StreamEvent);
      } catch {
        throw new TasklineClientError('protocol_error', `Event ${e.id ?? '?'} of ${id} is not JSON.`);
      }
    },
    ...hints,
  });
}
