// The shape of a tool and of the context a tool task runs in: types and `defineTool`, no runtime.
import type { z } from 'zod';

/** A JSON value: what a checkpoint holds (it is stored as JSON in the task record). */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A question for the caller: an MCP input request (`elicitation/create`, `sampling/createMessage`, ...). */
export interface InputRequest {
  method: string;
  params: Record<string, unknown>;
}

/** What a tool returns: an MCP CallToolResult (content blocks, optional structured output). */
export interface ToolResult {
  content: Record<string, unknown>[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

/** How long `ToolContext.awaitCallback` waits for its callback. */
export interface CallbackOptions {
  /** Milliseconds from the park; default the deployment's input timeout (TASKLINE_INPUT_TIMEOUT_S). */
  timeoutMs?: number;
}

/** A generation a tool runs as a child task (see `ToolContext.generate`). */
export interface GenerateRequest {
  model: string;
  input: string;
  maxOutputTokens?: number;
  temperature?: number;
}

export interface GenerateOutcome {
  text: string;
  usage: { input_tokens: number; output_tokens: number; total_tokens: number } | null;
  status: string;
}

/** Structured logs of one task: every line carries the task id, tenant, tool and attempt. */
export interface ToolLogger {
  info(event: string, fields?: Record<string, unknown>): void;
  warn(event: string, fields?: Record<string, unknown>): void;
  error(event: string, fields?: Record<string, unknown>): void;
}

/** The tool's view of the task it runs in. Everything here survives a worker restart. */
export interface ToolContext {
  readonly taskId: string;
  readonly tenant: string;
  /** This run of the task, from 1; a new attempt follows a crash, a drain or an answered question. */
  readonly attempt: number;
  /**
   * Aborted when the task is cancelled, the worker loses its lease, or a drain's deadline passes:
   * stop and return (or throw). `signal.reason` says which.
   */
  readonly signal: AbortSignal;
  /**
   * The state the last `checkpoint` of an earlier attempt stored, or undefined on a first run (and
   * under `onRestart: 'retry'`, which starts over). Under `resume` the attempt after a crash
   * continues from here.
   */
  readonly resumed: Json | undefined;
  /**
   * Stable for the task's whole life, the same on every attempt: pass it to outside systems that
   * deduplicate (an `Idempotency-Key` header, a CI run's name) so a repeated step is not repeated
   * there.
   */
  readonly idempotencyKey: string;
  readonly log: ToolLogger;
  /**
   * Shown to the caller as the task's `statusMessage`, and as MCP `notifications/progress` with
   * `progress`/`total` when given (MCP 2025-11-25, Progress).
   */
  progress(message: string, counts?: { progress?: number; total?: number }): Promise<void>;
  /**
   * Stores `state` (JSON) as the task's checkpoint, fenced by this attempt: a later attempt of a
   * `resume` tool reads it as `resumed`. Await it before a step that must not run twice.
   */
  checkpoint(state: Json): Promise<void>;
  /**
   * Asks the caller; returns the answers when every key has one already. Keys are unique over the
   * task's life: on a later attempt, answers already given come back at once instead of being asked
   * again. Otherwise the attempt ends here (this throws, and `signal` aborts: let it go): the task
   * waits for its caller holding no worker slot, and once answered a new attempt runs the tool again
   * from the start (or from its checkpoint), where this call returns the answers. A question its
   * caller cannot answer (it declared no such capability) is never asked: its key comes back
   * undefined, and the tool takes its documented default.
   */
  ask(requests: Record<string, InputRequest>): Promise<Record<string, unknown>>;
  /**
   * Waits for an outside system (a CI run, a batch job) to post its result. `start(url)` hands it
   * the callback URL: signed, one-use, the same on every attempt of the task. The task then waits
   * holding no worker slot; a POST of a JSON body on the URL resumes it under a new attempt, which
   * runs the tool again (from the start or its checkpoint) to this call, where `start` is not
   * called again and the body is returned. With no callback by `timeoutMs` (default: the
   * deployment's input timeout) the task ends `failed` with `callback_timeout`. `name` is unique
   * over the task's life (1-64 of `A-Za-z0-9_-.`). As with `ask`, an attempt that parks ends
   * here: this throws and `signal` aborts; let it go.
   */
  awaitCallback(name: string, start: (url: string) => unknown, options?: CallbackOptions): Promise<Json>;
  /**
   * Runs an LMSP response on a model as a child task of the same tenant and waits for it. The n-th
   * generation of a task is created idempotently, so a later attempt that replays the same steps
   * waits on the child it already started instead of generating twice.
   */
  generate(request: GenerateRequest): Promise<GenerateOutcome>;
}

/**
 * `required`: only ever runs as a task (callers without the Tasks extension get an error).
 * `optional`: a task for callers that hold it as one (the 2026-07-28 Tasks extension, or a
 * 2025-11-25 `params.task`); otherwise the call waits for the task's end, and the caller leaving
 * cancels it. `forbidden`: runs inline on the api replica that received the call (cheap tools).
 */
export type TaskSupport = 'required' | 'optional' | 'forbidden';

/**
 * What the next attempt does after an attempt was interrupted (worker crash, lost lease, a drain
 * past its deadline): `retry` runs the tool again from the start, `resume` runs it again with the
 * last checkpoint as `ctx.resumed`, `fail` ends the task `failed` (`server_restarted`). Default
 * `fail` for tools: running an outside side effect twice is the caller's risk to take.
 */
export type OnRestart = 'fail' | 'retry' | 'resume';

/** One round of a multi-round-trip (MRTR) exchange before any task exists. */
export type Prepared<A> = { ask: Record<string, InputRequest> } | { args: A };

/** What `prepare` may know of the deployment: the models it serves and its output cap. */
export interface PrepareContext {
  models: ReadonlyMap<string, unknown>;
  maxOutputTokens: number;
}

export interface ToolDefinition<S extends z.ZodObject = z.ZodObject, O extends z.ZodObject = z.ZodObject> {
  /** Unique in a deployment; MCP 2025-11-25 tool-name rules: 1-128 of `A-Za-z0-9_-.`. */
  name: string;
  /** Human-readable name for tool lists (MCP `title`). */
  title?: string;
  description: string;
  inputSchema: S;
  /** When given, `structuredContent` of a successful result must match it (MCP `outputSchema`). */
  outputSchema?: O;
  taskSupport: TaskSupport;
  /** Tasks of this tool one worker runs at once. Default 1. */
  concurrency?: number;
  /** Default `fail` (see OnRestart). */
  onRestart?: OnRestart;
  /**
   * Optional MRTR phase, run on the api replica before the task is created: ask the caller inline,
   * then return the arguments the task runs with. A throw refuses the call (an `isError` result, no
   * task).
   */
  prepare?(
    args: z.infer<S>,
    responses: Record<string, unknown>,
    deployment: PrepareContext,
  ): Prepared<z.infer<S>>;
  run(args: z.infer<S>, ctx: ToolContext): Promise<ToolResult>;
}

/** Declares a tool; `args` in `run` is inferred from `inputSchema`. */
export function defineTool<S extends z.ZodObject, O extends z.ZodObject = z.ZodObject>(
  tool: ToolDefinition<S, O>,
): ToolDefinition<S, O> {
  return tool;
}

/** Marks a ToolFailure of any copy of this package (a registry-wide symbol, not a class identity). */
const TOOL_FAILURE = Symbol.for('@taskline/tool-sdk.ToolFailure');

/** Thrown by a tool for a failure the caller should see as the task `failed` (not an `isError` result). */
export class ToolFailure extends Error {
  readonly [TOOL_FAILURE] = true;

  constructor(message: string) {
    super(message);
    this.name = 'ToolFailure';
  }

  /**
   * A team's image holds its own copy of this package beside the tool worker's, so the class a
   * tool throws is not the class the worker checks: `instanceof ToolFailure` asks for the mark.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    if (this !== ToolFailure) return Function.prototype[Symbol.hasInstance].call(this, value);
    return (
      typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[TOOL_FAILURE] === true
    );
  }
}
