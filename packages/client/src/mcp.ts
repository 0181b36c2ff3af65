// The MCP 2026-07-28 client with the Tasks extension: call tools as tasks, follow and answer them.
import { createParser } from 'eventsource-parser';
import {
  CallToolResultV2Schema,
  CreateTaskResultV2Schema,
  DetailedTaskV2Schema,
  TASKS_EXTENSION_ID_V2,
  type DetailedTaskV2,
  type InputRequestsV2,
  type InputResponsesV2,
} from '@modelcontextprotocol/ext-tasks/core/v2';
import { abortError, TasklineClientError } from './errors.js';
import { problemOf, send, transport, withRetryAfter, type Transport, type TransportOptions } from './http.js';
import { DEFAULT_POLL, nextPollDelay, type PollPolicy } from './poll.js';
import { credentialId, patchTracked, type TaskIdStore, type TaskScope } from './store.js';

export const MCP_PROTOCOL_VERSION = '2026-07-28';
export type McpTask = DetailedTaskV2;
export type { InputRequestsV2 as InputRequests, InputResponsesV2 as InputResponses };

/** A complete tool result (`content`, `structuredContent`, `isError`…). */
export type ToolResult = Record<string, unknown> & { content?: unknown[]; isError?: boolean };

/** Answers the input requests a task (or an MRTR round) asks; keys are the request keys. */
export type InputHandler = (requests: InputRequestsV2, taskId: string | null) => Promise<InputResponsesV2>;

export interface McpClientOptions extends TransportOptions {
  /** The MCP endpoint, e.g. `http://127.0.0.1:8080/mcp`. */
  url: string;
  store?: TaskIdStore;
  poll?: Partial<PollPolicy>;
  /** Use `subscriptions/listen` for `notifications/tasks` (default true); polling always backs it. */
  notifications?: boolean;
  clientInfo?: { name: string; version: string };
}

export interface FollowOptions {
  signal?: AbortSignal;
  /** Every task state that differs from the last one seen (status, message, open requests). */
  onStatus?: (task: McpTask) => void;
  onInput?: InputHandler;
}

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const MAX_INPUT_ROUNDS = 16;
/** JSON-RPC errors meaning "this server does not do task listening". */
const LISTEN_UNSUPPORTED = new Set([-32601, -32021, -32602]);

export const rpcCodeOf = (err: unknown): number | undefined =>
  err instanceof TasklineClientError && err.code === 'rpc_error'
    ? (err.details as { code?: number } | undefined)?.code
    : undefined;

/**
 * MCP 2026-07-28 with the Tasks extension. Any `tools/call` may answer with a task (or ask for
 * input first); `callTool` handles every case in one place and returns the tool's result.
 */
export class McpTasksClient {
  private readonly t: Transport;
  private readonly poll: PollPolicy;
  /** Whose entries of the store this client reads and writes. */
  readonly scope: TaskScope;
  private nextId = 1;

  constructor(private readonly o: McpClientOptions) {
    this.t = transport(o);
    this.poll = { ...DEFAULT_POLL, ...o.poll };
    this.scope = { endpoint: o.url, credential: credentialId(o.apiKey, o.jwtTenantClaim) };
  }

  /** The per-request `_meta` envelope; `elicitation` is declared only when an input handler can answer. */
  private envelope(input: boolean) {
    return {
      'io.modelcontextprotocol/protocolVersion': MCP_PROTOCOL_VERSION,
      'io.modelcontextprotocol/clientInfo': this.o.clientInfo ?? {
        name: '@taskline/client',
        version: '0.1.0',
      },
      'io.modelcontextprotocol/clientCapabilities': {
        extensions: { [TASKS_EXTENSION_ID_V2]: {} },
        ...(input && { elicitation: {} }),
      },
    };
  }

  private post(
    method: string,
    params: Record<string, unknown>,
    name: string | undefined,
    signal?: AbortSignal,
    input = false,
  ) {
    const id = this.nextId++;
    const res = send(this.t, this.o.url, {
      method: 'POST',
      headers: this.t.headers({
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-method': method,
        'mcp-protocol-version': MCP_PROTOCOL_VERSION,
        ...(name ? { 'mcp-name': name } : {}),
      }),
      body: JSON.stringify({
        jsonrpc: '2.0',
        id,
        method,
        params: { ...params, _meta: this.envelope(input) },
      }),
      signal,
    });
    return { id, res };
  }

  /**
   * One JSON-RPC request. `tools/call` is sent once (a retry could start a second task); task
   * methods are retried on failures that another try can fix.
   */
  async request(
    method: string,
    params: Record<string, unknown>,
    opts: { name?: string; signal?: AbortSignal; retry?: boolean; input?: boolean } = {},
  ): Promise<Record<string, unknown>> {
    for (let attempt = 1; ; attempt++) {
      try {
        const { id, res: pending } = this.post(method, params, opts.name, opts.signal, opts.input);
        const res = await pending;
        const type = res.headers.get('content-type') ?? '';
        if (!type.includes('json') && !type.includes('event-stream')) throw await problemOf(res);
        const message = type.includes('event-stream') ? await readSseReply(res, id) : await res.json();
        const m = message as {
          result?: Record<string, unknown>;
          error?: { code: number; message: string; data?: unknown };
        };
        if (m.error) {
          throw withRetryAfter(
            new TasklineClientError(
              'rpc_error',
              `${method}: ${m.error.message} (${m.error.code})`,
              res.status,
              m.error,
            ),
            res,
          );
        }
        if (!m.result)
          throw new TasklineClientError(
            'protocol_error',
            `${method}: the reply has neither result nor error.`,
          );
        return m.result;
      } catch (err) {
        if (opts.signal?.aborted) throw abortError();
        const retryable = err instanceof TasklineClientError && err.retryable;
        if (!opts.retry || !retryable || attempt >= this.t.maxAttempts) throw err;
        await this.t.clock.sleep(this.t.retryDelay(attempt, err), opts.signal);
      }
    }
  }

  /**
   * Calls a tool and returns its result, whatever shape the answer takes: a plain result, an
   * input request round (answered through `onInput`, then the call is sent again with the
   * answers), or a task (tracked in the store, then followed to its end by `follow`).
   */
  async callTool(name: string, args: Record<string, unknown>, opts: FollowOptions = {}): Promise<ToolResult> {
    let extra: Record<string, unknown> = {};
    for (let round = 0; round < MAX_INPUT_ROUNDS; round++) {
      const raw = await this.request(
        'tools/call',
        { name, arguments: args, ...extra },
        { name, signal: opts.signal, input: opts.onInput !== undefined },
      );
      if (raw.resultType === 'task') {
        const created = CreateTaskResultV2Schema.safeParse(raw);
        if (!created.success)
          throw new TasklineClientError('protocol_error', `tools/call ${name}: malformed task result.`);
        await this.track(created.data.taskId, { name, arguments: args }, created.data.status);
        return this.follow(created.data.taskId, opts);
      }
      const parsed = CallToolResultV2Schema.safeParse(raw);
      if (!parsed.success)
        throw new TasklineClientError('protocol_error', `tools/call ${name}: malformed result.`);
      if (parsed.data.resultType !== 'input_required') return raw as ToolResult;
      const answers = await this.answer(parsed.data.inputRequests ?? {}, null, opts.onInput);
      extra = {
        inputResponses: answers,
        ...(parsed.data.requestState !== undefined && { requestState: parsed.data.requestState }),
      };
    }
    throw new TasklineClientError(
      'protocol_error',
      `tools/call ${name}: still asking for input after ${MAX_INPUT_ROUNDS} rounds.`,
    );
  }

  private async track(taskId: string, request: unknown, status: string): Promise<void> {
    const now = this.t.clock.now();
    await this.o.store?.put({
      key: taskId,
      protocol: 'mcp',
      ...this.scope,
      taskId,
      request,
      status,
      lastEventId: 0,
      done: TERMINAL.has(status),
      createdAt: now,
      updatedAt: now,
    });
  }

  private async answer(requests: InputRequestsV2, taskId: string | null, onInput?: InputHandler) {
    if (!onInput) {
      throw new TasklineClientError(
        'input_required',
        `${taskId ?? 'The call'} asks for input (${Object.keys(requests).join(', ')}) and no input handler was given.`,
      );
    }
    return onInput(requests, taskId);
  }

  async getTask(taskId: string, signal?: AbortSignal): Promise<McpTask> {
    const raw = await this.request('tasks/get', { taskId }, { name: taskId, signal, retry: true });
    const parsed = DetailedTaskV2Schema.safeParse(raw);
    if (!parsed.success)
      throw new TasklineClientError('protocol_error', `tasks/get ${taskId}: malformed task.`);
    return parsed.data;
  }

  /**
   * Requests a cancel. The server only acknowledges: the task is `cancellation_requested` until
   * `getTask`/`follow` shows a terminal status (which may be `completed` if the work won the race).
   */
  async cancelTask(
    taskId: string,
    signal?: AbortSignal,
  ): Promise<{ taskId: string; state: 'cancellation_requested' }> {
    await this.request('tasks/cancel', { taskId }, { name: taskId, signal, retry: true });
    return { taskId, state: 'cancellation_requested' };
  }

  /**
   * Follows a task to its end: `notifications/tasks` over `subscriptions/listen` while the server
   * offers it, polling `tasks/get` (at the server's `pollIntervalMs`, jittered, backing off) when it
   * does not or the stream drops. Input requests go to `onInput` once per key. Returns the tool
   * result; a failed task throws `task_failed`, a cancelled one `task_cancelled`.
   */
  async follow(taskId: string, opts: FollowOptions = {}): Promise<ToolResult> {
    const answered = new Set<string>();
    let listen = this.o.notifications !== false;
    let lastKey = '';
    let unchanged = 0;
    let serverInterval = 0;

    const handle = async (task: McpTask): Promise<ToolResult | null> => {
      serverInterval = task.pollIntervalMs ?? serverInterval;
      const key = JSON.stringify([
        task.status,
        task.statusMessage,
        task.status === 'input_required' ? Object.keys(task.inputRequests) : null,
      ]);
      if (key === lastKey) unchanged++;
      else {
        lastKey = key;
        unchanged = 0;
        opts.onStatus?.(task);
        await patchTracked(
          this.o.store ?? NO_STORE,
          taskId,
          this.scope,
          { status: task.status, done: TERMINAL.has(task.status) },
          this.t.clock.now(),
        );
      }
      if (task.status === 'input_required') {
        const fresh = Object.fromEntries(
          Object.entries(task.inputRequests).filter(([k]) => !answered.has(k)),
        );
        if (Object.keys(fresh).length > 0) {
          const answers = await this.answer(fresh, taskId, opts.onInput);
          await this.request(
            'tasks/update',
            { taskId, inputResponses: answers },
            { name: taskId, signal: opts.signal, retry: true },
          );
          for (const k of Object.keys(fresh)) answered.add(k);
        }
      }
      if (task.status === 'completed') return task.result as ToolResult;
      if (task.status === 'failed')
        throw new TasklineClientError(
          'task_failed',
          `Task ${taskId} failed: ${task.error.message}`,
          undefined,
          task.error,
        );
      if (task.status === 'cancelled')
        throw new TasklineClientError('task_cancelled', `Task ${taskId} was cancelled.`);
      return null;
    };

    let task = await this.getTask(taskId, opts.signal);
    for (;;) {
      const result = await handle(task);
      if (result) return result;
      if (listen) {
        try {
          for await (const notified of this.listen(taskId, opts.signal)) {
            const done = await handle(notified);
            if (done) return done;
          }
        } catch (err) {
          if (opts.signal?.aborted) throw abortError();
          const code = rpcCodeOf(err);
          if (code !== undefined && LISTEN_UNSUPPORTED.has(code)) listen = false;
          else if (!(err instanceof TasklineClientError) || !err.retryable) throw err;
        }
      }
      // The listen stream ended or is not offered: the poll below is what always works.
      await this.t.clock.sleep(
        nextPollDelay(this.poll, unchanged, this.t.random(), serverInterval),
        opts.signal,
      );
      task = await this.getTask(taskId, opts.signal);
    }
  }

  /** `notifications/tasks` for one task until the server ends the listen or the connection drops. */
  async *listen(taskId: string, signal?: AbortSignal): AsyncGenerator<McpTask> {
    const { id, res: pending } = this.post(
      'subscriptions/listen',
      { notifications: { taskIds: [taskId] } },
      undefined,
      signal,
    );
    const res = await pending;
    const type = res.headers.get('content-type') ?? '';
    if (type.includes('application/json')) {
      const m = (await res.json()) as { error?: { code: number; message: string } };
      if (m.error)
        throw new TasklineClientError(
          'rpc_error',
          `subscriptions/listen: ${m.error.message}`,
          res.status,
          m.error,
        );
      return;
    }
    if (!type.includes('event-stream')) throw await problemOf(res);
    const queue: unknown[] = [];
    const parser = createParser({ onEvent: (e) => queue.push(JSON.parse(e.data)) });
    const decoder = new TextDecoder();
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        parser.feed(decoder.decode(chunk, { stream: true }));
        for (const message of queue.splice(0) as { id?: unknown; method?: string; params?: unknown }[]) {
          if (message.id === id) return;
          if (message.method !== 'notifications/tasks') continue;
          const parsed = DetailedTaskV2Schema.safeParse(message.params);
          if (parsed.success && parsed.data.taskId === taskId) yield parsed.data;
        }
      }
    } catch (err) {
      if (signal?.aborted) throw abortError();
      if (err instanceof TasklineClientError) throw err;
      // A cut connection: the caller polls, then listens again.
    }
  }

  /** Follows every MCP task in the store that did not end (after a crash of this client). */
  async resume(
    opts: FollowOptions = {},
  ): Promise<{ taskId: string; result?: ToolResult; error?: TasklineClientError }[]> {
    const out: { taskId: string; result?: ToolResult; error?: TasklineClientError }[] = [];
    for (const entry of (await this.o.store?.unfinished(this.scope)) ?? []) {
      if (entry.protocol !== 'mcp' || !entry.taskId) continue;
      try {
        out.push({ taskId: entry.taskId, result: await this.follow(entry.taskId, opts) });
      } catch (err) {
        if (!(err instanceof TasklineClientError)) throw err;
        if (rpcCodeOf(err) === -32602)
          await patchTracked(
            this.o.store!,
            entry.key,
            this.scope,
            { done: true, status: 'not_found' },
            this.t.clock.now(),
          );
        out.push({ taskId: entry.taskId, error: err });
      }
    }
    return out;
  }
}

const NO_STORE: TaskIdStore = { put: () => undefined, get: () => null, unfinished: () => [] };

/** Reads an SSE-framed JSON-RPC reply up to the message answering `id`. */
async function readSseReply(res: Response, id: number): Promise<unknown> {
  let reply: unknown;
  const parser = createParser({
    onEvent: (e) => {
      const m = JSON.parse(e.data) as { id?: unknown };
      if (m.id === id) reply = m;
    },
  });
  const decoder = new TextDecoder();
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    parser.feed(decoder.decode(chunk, { stream: true }));
    if (reply !== undefined) break;
  }
  if (reply === undefined)
    throw new TasklineClientError('protocol_error', 'The SSE reply ended without a response.');
  return reply;
}
