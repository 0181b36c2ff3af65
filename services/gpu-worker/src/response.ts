// Runs `response` tasks: the request as chat messages, generation, deltas and the end.
import {
  emptyResponse,
  TasklineError,
  type EventInput,
  type Finish,
  type RunContext,
  type TaskRecord,
  type TaskRunner,
} from '@taskline/engine';
import { randomUUID } from 'node:crypto';
import {
  InvalidRequestError,
  type ChatMessage,
  type GenerateResult,
  type GenerateStep,
  type ModelBackend,
} from '@taskline/inference';
import { whenRedisAnswers } from '@taskline/task-worker';

/** The LMSP response request a `response` task holds (LMSP 1.0 section 6). */
export interface ResponseRequest {
  model: string;
  input: string | InputItem[];
  instructions?: string;
  max_output_tokens?: number;
  temperature?: number;
  top_p?: number;
  seed?: number;
}

interface InputItem {
  type?: string;
  role?: string;
  content: string | { type: string; text?: string }[];
}

/** LMSP roles as chat-template roles: `developer` instructions are what templates call `system`. */
const ROLES = new Map<string, ChatMessage['role']>([
  ['system', 'system'],
  ['developer', 'system'],
  ['user', 'user'],
  ['assistant', 'assistant'],
]);

/** Renders the request as chat messages: instructions first, then the input items in order. */
export function toMessages(request: ResponseRequest): ChatMessage[] {
  const messages: ChatMessage[] = [];
  if (request.instructions) messages.push({ role: 'system', content: request.instructions });
  if (typeof request.input === 'string') {
    messages.push({ role: 'user', content: request.input });
    return messages;
  }
  if (!Array.isArray(request.input))
    throw new TasklineError('invalid_request', 'input must be a string or a list of message items');
  for (const item of request.input) {
    const role = ROLES.get(item.role ?? 'user');
    if (!role) throw new TasklineError('invalid_request', `unsupported message role ${item.role}`);
    const content =
      typeof item.content === 'string'
        ? item.content
        : item.content
            .filter((p) => p.type === 'input_text' || p.type === 'output_text')
            .map((p) => p.text ?? '')
            .join('');
    messages.push({ role, content });
  }
  return messages;
}

/**
 * A worker's one flush timer. The generations it runs that have output waiting append on the same
 * tick, so the appends of a batch leave in one write (ioredis pipelines what one turn of the event
 * loop sends) and reach Redis, the api and the clients together, not on a timer each.
 */
export class FlushClock {
  private readonly due = new Set<() => void>();
  private timer: NodeJS.Timeout | null = null;

  /** `everyMs`: TASKLINE_STREAM_FLUSH_MS; 0 appends whenever the previous append is done. */
  constructor(readonly everyMs: number) {}

  /** Runs `fire` on the next tick; returns its cancel. */
  schedule(fire: () => void): () => void {
    this.due.add(fire);
    this.timer ??= setTimeout(() => this.tick(), this.everyMs);
    return () => void this.due.delete(fire);
  }

  private tick(): void {
    this.timer = null;
    const due = [...this.due];
    this.due.clear();
    for (const fire of due) fire();
  }
}

/**
 * Streams a generation's deltas into the task's event log with at most one append in flight and
 * at most one append per tick of the worker's shared clock (the first at once, for time to first
 * token): whatever the model produces meanwhile is merged into the next append, so a fast model
 * makes fewer, larger events, never reordered or lost ones, and the Redis, api and client work per
 * generation is bounded by the tick, not by the model's token rate.
 */
class DeltaStream {
  private text = '';
  private tokens: number[] = [];
  private inflight: Promise<void> | null = null;
  private failure: unknown = null;
  /** The batch whose append failed: not in the log, so the attempt's end may still carry it. */
  private refused: { events: EventInput[]; tokens: number[] } = { events: [], tokens: [] };
  /** Whether the first append has been sent (it alone does not wait for a tick). */
  private started = false;
  /** Cancels the append scheduled next, if one is. */
  private scheduled: (() => void) | null = null;
  private closed = false;

  constructor(
    private readonly ctx: RunContext,
    private readonly itemId: string,
    /** Events that must precede the first delta (output item and content part announcements). */
    private prologue: EventInput[],
    private readonly clock: FlushClock,
    private readonly onFailure: () => void,
    /** How long an append is made again while Redis is unavailable (see whenRedisAnswers). */
    private readonly retryMs: number,
  ) {}

  push(text: string, tokens: number[]): void {
    this.text += text;
    this.tokens.push(...tokens);
    this.kick();
  }

  /**
   * Schedules the next append. The first goes once the current turn of the event loop is over (so
   * that a generation ending in the same turn, an instant backend or a cached answer, sends all of
   * its output with its end, in one write); every later one on the clock's next tick, even when an
   * append took longer than a tick: the appends of all generations then leave together, one round
   * trip a tick, and a generation makes at most one append a tick whatever its token rate.
   */
  private kick(): void {
    if (this.inflight || this.scheduled || this.closed || this.failure) return;
    if (this.text === '' && this.tokens.length === 0) return;
    const fire = () => {
      this.scheduled = null;
      this.send();
    };
    if (!this.started) {
      const immediate = setImmediate(fire);
      this.scheduled = () => clearImmediate(immediate);
    } else this.scheduled = this.clock.schedule(fire);
  }

  private send(): void {
    if (this.inflight || this.closed || this.failure) return;
    if (this.text === '' && this.tokens.length === 0) return;
    this.started = true;
    const batch = this.take();
    // One nonce for the batch however often it is sent: it is stored once (append.lua).
    const nonce = randomUUID();
    const { store, task, attempt } = this.ctx;
    this.inflight = whenRedisAnswers(this.retryMs, () =>
      store.append(task.id, attempt, batch.tokens, batch.events, nonce),
    )
      .then(
        () => undefined,
        (err: unknown) => {
          this.failure = err;
          this.refused = batch;
          this.onFailure();
        },
      )
      .finally(() => {
        this.inflight = null;
        this.kick();
      });
  }

  /**
   * Waits until everything appended so far is stored; rethrows a failed append (e.g. `stale_attempt`).
   * Returns what is still held back (announcements, the last text and tokens) as events for the
   * attempt's end, so the end of a generation never waits out the flush interval.
   */
  async flush(): Promise<{ events: EventInput[]; tokens: number[] }> {
    this.close();
    while (this.inflight) await this.inflight;
    if (this.failure) throw this.failure;
    return this.take();
  }

  /**
   * After `flush` threw: what never reached the log (the refused append, then everything held back
   * since), for an end that still may be written (a cancel refuses appends, not the cancelled end).
   */
  unsent(): { events: EventInput[]; tokens: number[] } {
    const rest = this.take();
    return {
      events: [...this.refused.events, ...rest.events],
      tokens: [...this.refused.tokens, ...rest.tokens],
    };
  }

  /** Everything held back, as the events and token ids of one append. */
  private take(): { events: EventInput[]; tokens: number[] } {
    const events = this.prologue;
    this.prologue = [];
    if (this.text !== '') {
      events.push({
        type: 'response.output_text.delta',
        data: {
          task_status: 'running',
          item_id: this.itemId,
          output_index: 0,
          content_index: 0,
          delta: this.text,
        },
      });
    }
    const tokens = this.tokens;
    this.text = '';
    this.tokens = [];
    return { events, tokens };
  }

  /** Starts no more appends (the one in flight still lands). */
  close(): void {
    this.closed = true;
    this.scheduled?.();
    this.scheduled = null;
  }
}

export interface ResponseRunnerOptions {
  /** The worker's flush clock (TASKLINE_STREAM_FLUSH_MS); default: append whenever ready. */
  clock?: FlushClock;
  /** How long an append is made again while Redis is unavailable (the lease); default: not at all. */
  retryUnavailableMs?: number;
  /** The attempt's first output token was produced. */
  onFirstToken?: () => void;
  /** The model made `count` tokens (counted as made, before they are appended or held back). */
  onTokens?: (count: number) => void;
  /** The attempt ended (however): tokens it generated, seconds from its first token to its end. */
  onGenerated?: (tokens: number, secondsAfterFirst: number) => void;
}

/**
 * The worker's runner for LMSP responses on one model backend: renders the request, generates,
 * streams `response.output_text.delta` events as tokens come, and ends with the response object
 * (output and usage). `max_output_tokens` ends the response `incomplete` (the task succeeds).
 */
export function createResponseRunner(backend: ModelBackend, options: ResponseRunnerOptions = {}): TaskRunner {
  return { run: (ctx: RunContext) => run(backend, options, ctx) };
}

/** The fields every event of the output item carries while the task runs. */
const running = { task_status: 'running', output_index: 0 };
const part = (text: string) => ({ type: 'output_text', text, annotations: [] });
/** The output message item of the response, by its id. */
const itemOf = (itemId: string) => (status: string, content: unknown[]) => ({
  id: itemId,
  type: 'message',
  status,
  role: 'assistant',
  content,
});
type Item = ReturnType<typeof itemOf>;
type Pending = { events: EventInput[]; tokens: number[] };

/** One attempt of a `response` task: generates, streams its deltas, and ends it. */
async function run(backend: ModelBackend, options: ResponseRunnerOptions, ctx: RunContext): Promise<Finish> {
  const { task, store, signal } = ctx;
  const request = task.request as ResponseRequest;
  const messages = toMessages(request);
  // Tokens a previous attempt stored (resume policy, after a crash or a drain): continue after them.
  // The first attempt has none (only a running attempt stores tokens): no read on its way to the first token.
  const resumeTokens = backend.canSnapshot && ctx.attempt > 1 ? await store.snapshot(task.id) : [];
  const itemId = `msg_${task.id.slice(task.id.indexOf('_') + 1)}`;
  const item = itemOf(itemId);
  const prologue: EventInput[] = resumeTokens.length > 0 ? [] : opening(itemId, item);
  const local = new AbortController();
  const onAbort = () => local.abort(signal.reason);
  signal.addEventListener('abort', onAbort, { once: true });
  const stream = new DeltaStream(
    ctx,
    itemId,
    prologue,
    options.clock ?? new FlushClock(0),
    () => local.abort('append_failed'),
    options.retryUnavailableMs ?? 0,
  );
  let generated = 0;
  let firstTokenAt = 0n;
  const onStep = (step: { text: string; tokens: number[] }) => {
    if (generated === 0 && step.tokens.length > 0) {
      firstTokenAt = process.hrtime.bigint();
      options.onFirstToken?.();
    }
    generated += step.tokens.length;
    if (step.tokens.length > 0) options.onTokens?.(step.tokens.length);
    stream.push(step.text, step.tokens);
  };
  try {
    const result = await generate(backend, request, { messages, resumeTokens }, local.signal, onStep);
    const pending = await flushed(stream, result);
    return ended(task, itemId, item, result, pending);
  } finally {
    stream.close();
    signal.removeEventListener('abort', onAbort);
    if (generated > 0) options.onGenerated?.(generated, Number(process.hrtime.bigint() - firstTokenAt) / 1e9);
  }
}

/** The events that open the output item, sent before the first delta of a first attempt. */
function opening(itemId: string, item: Item): EventInput[] {
  return [
    { type: 'response.output_item.added', data: { ...running, item: item('in_progress', []) } },
    {
      type: 'response.content_part.added',
      data: { ...running, item_id: itemId, content_index: 0, part: part('') },
    },
  ];
}

/** Generates the response; a request the model refuses fails the task as the caller's error. */
function generate(
  backend: ModelBackend,
  request: ResponseRequest,
  { messages, resumeTokens }: { messages: ChatMessage[]; resumeTokens: number[] },
  signal: AbortSignal,
  onStep: (step: GenerateStep) => void,
): Promise<GenerateResult> {
  return backend
    .generate(
      {
        messages,
        maxOutputTokens: request.max_output_tokens,
        temperature: request.temperature,
        topP: request.top_p,
        seed: request.seed,
        resumeTokens,
      },
      { signal, onStep },
    )
    .catch((err: unknown) => {
      // The caller's request (too long for the context, refused by the chat template), not the
      // worker: the task fails with a 4xx code the caller can act on.
      throw err instanceof InvalidRequestError ? new TasklineError('invalid_request', err.message) : err;
    });
}

/** The deltas still held back once generation ended, which go with the end. */
function flushed(stream: DeltaStream, result: GenerateResult): Promise<Pending> {
  return stream.flush().catch((err: unknown) => {
    // A cancel makes the store refuse appends (the task is `cancelling`), which also stops the
    // model at once; the refused text goes with the cancelled end, as the held-back text does.
    const refusedByCancel =
      err instanceof TasklineError &&
      err.code === 'illegal_transition' &&
      err.details.status === 'cancelling';
    if (result.finishReason === 'cancelled' && refusedByCancel) return stream.unsent();
    throw err;
  });
}

/** The attempt's end: cancelled, or succeeded (`incomplete` at max_output_tokens) with its closing events. */
function ended(
  task: TaskRecord,
  itemId: string,
  item: Item,
  result: GenerateResult,
  pending: Pending,
): Finish {
  const usage = {
    input_tokens: result.inputTokens,
    output_tokens: result.outputTokens,
    total_tokens: result.inputTokens + result.outputTokens,
  };
  if (result.finishReason === 'cancelled') {
    const response = {
      ...emptyResponse(task, 'cancelled'),
      output: [item('incomplete', [part(result.text)])],
      usage,
    };
    // The deltas still to come: the stream's deltas add up to the cancelled response's text.
    return { status: 'cancelled', result: response, events: pending.events };
  }
  const incomplete = result.finishReason === 'max_output_tokens';
  const status = incomplete ? 'incomplete' : 'completed';
  const done = item(status, [part(result.text)]);
  const response = {
    ...emptyResponse(task, status),
    output: [done],
    usage,
    incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
  };
  // The held-back text and the closing events land with the end itself. Their token ids are
  // not stored: a finished task is never resumed, and its result holds the whole text.
  return {
    status: 'succeeded',
    result: response,
    events: [
      ...pending.events,
      {
        type: 'response.output_text.done',
        data: { ...running, item_id: itemId, content_index: 0, text: result.text },
      },
      {
        type: 'response.content_part.done',
        data: { ...running, item_id: itemId, content_index: 0, part: part(result.text) },
      },
      { type: 'response.output_item.done', data: { ...running, item: done } },
    ],
  };
}
