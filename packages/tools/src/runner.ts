// Runs `tool` tasks on a worker: looks up the tool, runs one attempt, commits its end.
import {
  callbackKey,
  callbackUrl,
  CALLBACK_METHOD,
  EventHub,
  isCallbackKey,
  isRedisUnavailable,
  isTerminal,
  problem,
  TasklineError,
  type CallbackSettings,
  type Finish,
  type RunContext,
  type RunOutcome,
  type ServedModels,
  type StoredEvent,
  type TaskRecord,
  type TaskRunner,
  type TaskStore,
} from '@taskline/engine';
import { activeSpan, traceparentOf } from '@taskline/tracing';
import {
  ToolFailure,
  type GenerateOutcome,
  type GenerateRequest,
  type InputRequest,
  type Json,
  type ToolContext,
  type ToolLogger,
} from '@taskline/tool-sdk';
import { canAnswer, checkGeneration, type ToolRegistry, type ToolTaskRequest } from './api.js';

/** A structured logger that can stamp fields on every line (`@taskline/log`'s Logger is one). */
export interface RunnerLogger extends ToolLogger {
  child(fields: Record<string, unknown>): RunnerLogger;
}

const silent: RunnerLogger = { info() {}, warn() {}, error() {}, child: () => silent };

export interface ToolRunnerOptions {
  /** Tails task events (answers to input requests, child tasks). Made from the store's Redis when absent. */
  hub?: EventHub;
  /**
   * The models this deployment serves and its output cap (`servedModelsFromEnv`): a generation
   * outside them fails the tool at once instead of leaving a child task queued forever.
   */
  served?: ServedModels;
  /** Each task's `ctx.log` is its child, stamped with the task id, tenant, tool and attempt. */
  log?: RunnerLogger;
  /** Largest checkpoint (JSON bytes) `ctx.checkpoint` stores (TASKLINE_TOOL_CHECKPOINT_MAX_BYTES); unbounded when absent. */
  checkpointMaxBytes?: number;
  /**
   * Where callback URLs point and what signs them (TASKLINE_PUBLIC_URL, TASKLINE_WEBHOOK_LINK_SECRET);
   * without them `ctx.awaitCallback` fails the task.
   */
  callbacks?: CallbackSettings;
}

/** Thrown out of `ask` and `awaitCallback` once the task is parked: the attempt is over (see ToolContext.ask). */
class Parked extends Error {
  constructor() {
    super('the task is parked until its input requests are answered or its callback arrives');
    this.name = 'Parked';
  }
}

export interface ToolRunner extends TaskRunner {
  /** Closes the hub connection the runner opened itself. */
  close(): Promise<void>;
}

/**
 * Runs tasks of kind `tool`: the worker claims the task, this looks up the tool and runs one
 * attempt. A tool's errors are results (`isError`, the task ends `succeeded`, MCP `completed`),
 * what it throws included; a ToolFailure or an engine error fails the task (MCP `failed`).
 */
export function createToolRunner(registry: ToolRegistry, options: ToolRunnerOptions = {}): ToolRunner {
  let hub = options.hub;
  let ownHub: EventHub | null = null;
  const hubFor = (store: TaskStore): EventHub => (hub ??= ownHub = new EventHub(store));
  return {
    async run(ctx: RunContext): Promise<RunOutcome> {
      const request = ctx.task.request as ToolTaskRequest;
      const tool = registry.get(request.tool);
      if (!tool) return refused(`unknown tool ${request.tool}`);
      const parsed = tool.inputSchema.safeParse(request.arguments);
      if (!parsed.success) {
        // During a rolling deploy: the task was validated against an older schema (docs/tools.md).
        const created = request.version ? ` (the task was created against version ${request.version})` : '';
        return refused(`invalid arguments${created}: ${parsed.error.message}`);
      }
      // Aborted when the task parks: whatever the tool still does, this attempt holds the task no more.
      const parking = new AbortController();
      const signal = AbortSignal.any([ctx.signal, parking.signal]);
      try {
        const context = await toolContext(
          { ...ctx, signal },
          request.tool,
          hubFor(ctx.store),
          options,
          parking,
        );
        const result = await tool.run(parsed.data, context);
        if (parking.signal.aborted) return { status: 'parked' };
        if (ctx.signal.aborted) return { status: 'cancelled', result };
        return { status: 'succeeded', result };
      } catch (err) {
        if (parking.signal.aborted) return { status: 'parked' };
        if (ctx.signal.aborted) return { status: 'cancelled' };
        if (err instanceof ToolFailure) return failed('tool_failed', err.message);
        // Redis unavailable under a progress or an ask: a lost attempt for the worker, not a failure.
        if (isRedisUnavailable(err)) throw err;
        // The engine's errors under the tool are internal errors, not the tool's.
        if (err instanceof TasklineError) return failed('internal_error', err.message);
        // Anything else the tool threw is its execution error, which MCP reports as the tool's
        // result (the SDK's blocking call does so): `completed` with isError, never `failed`
        // (MCP 2026-07-28 Tasks extension, Task Execution Errors).
        const text = err instanceof Error ? err.message : String(err);
        return { status: 'succeeded', result: { content: [{ type: 'text', text }], isError: true } };
      }
    },
    async close() {
      ownHub?.close();
    },
  };
}

function failed(code: string, detail: string): Finish {
  return { status: 'failed', error: problem(code, detail) };
}

/** The task's request no longer fits its tool (a rolling deploy): the caller's fault, as LMSP answers a bad create. */
function refused(detail: string): Finish {
  return { status: 'failed', error: problem('invalid_request', detail, 400) };
}

/**
 * The checkpoint an attempt starts from: the last one stored, for a `resume` task after its first
 * attempt; undefined on a first run and under `retry` (which starts over) or `fail`.
 */
async function resumedState(ctx: RunContext): Promise<Json | undefined> {
  if (ctx.task.onRestart !== 'resume' || ctx.attempt <= 1) return undefined;
  const stored = await ctx.store.lastCheckpoint(ctx.task.id);
  return stored === null ? undefined : (JSON.parse(stored) as Json);
}

/** Stores a checkpoint: JSON, within the size bound, fenced by the attempt (a ToolFailure otherwise). */
async function saveCheckpoint(ctx: RunContext, state: Json, maxBytes = Infinity): Promise<void> {
  const json = JSON.stringify(state) as string | undefined;
  if (json === undefined) throw new ToolFailure('checkpoint: the state is not JSON');
  const bytes = Buffer.byteLength(json);
  if (bytes > maxBytes)
    throw new ToolFailure(
      `checkpoint: ${bytes} bytes, above the limit of ${maxBytes} (TASKLINE_TOOL_CHECKPOINT_MAX_BYTES)`,
    );
  await ctx.store.checkpoint(ctx.task.id, ctx.attempt, json);
}

async function toolContext(
  ctx: RunContext,
  toolName: string,
  hub: EventHub,
  options: ToolRunnerOptions,
  parking: AbortController,
): Promise<ToolContext> {
  const { store, task, attempt, signal } = ctx;
  let generations = 0;
  return {
    taskId: task.id,
    tenant: task.tenant,
    attempt,
    signal,
    resumed: await resumedState(ctx),
    // The task id: unique, and the same on every attempt of the task.
    idempotencyKey: task.id,
    log: (options.log ?? silent).child({ task: task.id, tenant: task.tenant, tool: toolName, attempt }),
    async progress(message, counts) {
      await store.progress(task.id, attempt, message, counts);
    },
    checkpoint: (state) => saveCheckpoint(ctx, state, options.checkpointMaxBytes),
    awaitCallback: (name, start, wait) =>
      awaitCallback(ctx, options.callbacks, parking, name, start, wait?.timeoutMs),
    async ask(requests: Record<string, InputRequest>) {
      if (Object.keys(requests).some(isCallbackKey))
        throw new ToolFailure(`ask: keys starting "callback:" are reserved for ctx.awaitCallback`);
      const { capabilities } = task.request as ToolTaskRequest;
      const askable = Object.entries(requests).filter(([, request]) => canAnswer(capabilities, request));
      if (askable.length === 0) return Object.fromEntries(Object.keys(requests).map((k) => [k, undefined]));
      const { parked, answers } = await store.requestInput(task.id, attempt, Object.fromEntries(askable));
      // Waiting holds no worker slot and no lease: the answers start a new attempt, which replays them.
      if (parked) parkHere(parking);
      return Object.fromEntries(Object.keys(requests).map((k) => [k, answers[k]]));
    },
    generate: (request) => generateChild(store, hub, task, signal, request, generations++, options.served),
  };
}

/** Ends the attempt at its park: whatever the tool still does, this attempt holds the task no more. */
function parkHere(parking: AbortController): never {
  parking.abort('parked');
  throw new Parked();
}

const CALLBACK_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * `ctx.awaitCallback`: the key is recorded as a question first, so a callback that beats the park
 * is kept; `start` runs unless the callback arrived already (on an earlier attempt); then the task
 * parks until the callback or its deadline, or goes on at once with the body.
 */
async function awaitCallback(
  ctx: RunContext,
  settings: CallbackSettings | undefined,
  parking: AbortController,
  name: string,
  start: (url: string) => unknown,
  timeoutMs: number | undefined,
): Promise<Json> {
  if (!settings)
    throw new ToolFailure(
      'awaitCallback: callbacks are off on this worker (TASKLINE_WEBHOOK_LINK_SECRET and TASKLINE_PUBLIC_URL)',
    );
  if (!CALLBACK_NAME.test(name))
    throw new ToolFailure(`awaitCallback: name must be 1-64 of A-Za-z0-9_-. (got "${name}")`);
  if (timeoutMs !== undefined && !(Number.isInteger(timeoutMs) && timeoutMs > 0))
    throw new ToolFailure('awaitCallback: timeoutMs must be a positive integer');
  const { store, task, attempt } = ctx;
  const key = callbackKey(name);
  const request = { method: CALLBACK_METHOD, params: { name } };
  if (!(await store.expectCallback(task.id, attempt, key, request)))
    await start(callbackUrl(settings, task, key));
  const { parked, answers } = await store.requestInput(task.id, attempt, { [key]: request }, timeoutMs);
  if (parked) parkHere(parking);
  return answers[key] as Json;
}

/**
 * Resolves once `done()` holds, re-checked after every event of task `id` past `after`;
 * rejects when `signal` aborts or the task ends first.
 */
export async function waitFor(
  hub: EventHub,
  id: string,
  after: number,
  signal: AbortSignal,
  done: (event: StoredEvent | null) => Promise<boolean>,
): Promise<void> {
  if (await done(null)) return;
  await new Promise<void>((resolve, reject) => {
    let settled = false;
    let sub: { close(): void } | null = null;
    const finish = (err?: unknown) => {
      if (settled) return;
      settled = true;
      sub?.close();
      signal.removeEventListener('abort', onAbort);
      if (err) reject(err instanceof Error ? err : new Error(String(err)));
      else resolve();
    };
    const onAbort = () => finish(signal.reason ?? new Error('aborted'));
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    let chain = Promise.resolve();
    hub
      .subscribe(id, after, (event) => {
        chain = chain
          .then(async () => {
            if (settled) return;
            if (await done(event)) return finish();
            const status = (JSON.parse(event.data) as { task_status?: string }).task_status;
            if (status === 'succeeded' || status === 'failed' || status === 'cancelled') {
              finish(new TasklineError('task_terminal', `task ${id} ended ${status} while waited on`));
            }
          })
          .catch(finish);
      })
      .then((s) => {
        sub = s;
        if (settled) s.close();
      }, finish);
  });
}

/** Whether the task is being (or was) cancelled: the one end that never steps back. */
async function cancelledTask(store: TaskStore, id: string): Promise<boolean> {
  const status = (await store.get(id))?.status;
  return status === undefined || status === 'cancelling' || status === 'cancelled';
}

/** LMSP response text: the `output_text` parts of its message items. */
function responseText(response: { output?: unknown[] } | null): string {
  const parts: string[] = [];
  for (const item of response?.output ?? []) {
    const content = (item as { content?: { type?: string; text?: string }[] }).content ?? [];
    for (const c of content) if (c.type === 'output_text' && typeof c.text === 'string') parts.push(c.text);
  }
  return parts.join('');
}

/**
 * Runs an LMSP response as a child task of the same tenant and waits for it. The n-th generation
 * of a task is created idempotently under (task, n), so a retried attempt that replays the same
 * steps waits on the child it already started instead of generating twice.
 */
async function generateChild(
  store: TaskStore,
  hub: EventHub,
  parent: TaskRecord,
  signal: AbortSignal,
  request: GenerateRequest,
  n: number,
  served: ServedModels | undefined,
): Promise<GenerateOutcome> {
  // The same rules as an LMSP create, which stores the cap when no max_output_tokens is given.
  let maxOutputTokens = request.maxOutputTokens;
  if (served) {
    try {
      maxOutputTokens = checkGeneration(served, request.model, maxOutputTokens);
    } catch (err) {
      throw new ToolFailure(err instanceof Error ? err.message : String(err));
    }
  }
  const body = {
    model: request.model,
    input: request.input,
    ...(maxOutputTokens !== undefined && { max_output_tokens: maxOutputTokens }),
    ...(request.temperature !== undefined && { temperature: request.temperature }),
  };
  const { task: child } = await store.createIdempotent(
    // Dispatched under its parent's place (see queueTenant): never starved by the parent it runs for.
    {
      tenant: parent.tenant,
      kind: 'response',
      model: request.model,
      onRestart: 'retry',
      request: body,
      parent: parent.id,
      // A child of the tool task's trace: its spans sit under the attempt that asked for it.
      traceparent: traceparentOf(activeSpan()),
    },
    `tool:${parent.id}:${n}`,
    JSON.stringify(body),
  );
  // The child outlives this attempt: a successor (after a lost lease or a drain) replays this step
  // and waits on the same child. Only the task's own cancel, which no attempt can undo, takes it down.
  const onAbort = () =>
    void cancelledTask(store, parent.id)
      .then(async (cancelled) => {
        if (cancelled) await store.cancel(child.id, parent.tenant);
      })
      .catch(() => undefined);
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    await waitFor(hub, child.id, 0, signal, async () => {
      const now = await store.get(child.id);
      return !now || isTerminal(now.status);
    }).catch((err: unknown) => {
      if (!(err instanceof TasklineError && err.code === 'task_terminal')) throw err;
    });
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
  const done = await store.get(child.id);
  // The tool's own execution errors (an isError result), as the blocking call reports them.
  if (!done) throw new Error(`generation ${child.id} expired before it was read`);
  if (done.status === 'failed')
    throw new Error(`generation failed: ${done.error?.detail ?? 'unknown error'}`);
  const response = done.result as {
    output?: unknown[];
    usage?: GenerateOutcome['usage'];
    status?: string;
  } | null;
  return {
    text: responseText(response),
    usage: response?.usage ?? null,
    status: response?.status ?? done.status,
  };
}
