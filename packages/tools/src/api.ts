// The API a long-running tool is written against: its context, input requests and result.
import { z } from 'zod';
import { outputTokens, servedModel, type ServedModels } from '@taskline/engine';

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

/** The tool's view of the task it runs in. Everything here survives a worker restart. */
export interface ToolContext {
  readonly taskId: string;
  readonly tenant: string;
  /** Aborted when the task is cancelled or the worker loses it: stop and return (or throw). */
  readonly signal: AbortSignal;
  /** Shown to the caller as the task's `statusMessage`. */
  progress(message: string): Promise<void>;
  /**
   * Asks the caller; returns the answers when every key has one already. Keys are unique over the
   * task's life: on a retried attempt, answers already given come back at once instead of being
   * asked again. Otherwise the attempt ends here (this throws, and `signal` aborts: let it go): the
   * task waits for its caller holding no worker slot, and once answered a new attempt runs the tool
   * again from the start, where this call returns the answers. Steps before an `ask` therefore run
   * again (`generate` is replayed, not run twice). A question its caller cannot answer (see
   * `canAnswer`) is never asked: its key comes back undefined, and the tool takes its documented
   * default.
   */
  ask(requests: Record<string, InputRequest>): Promise<Record<string, unknown>>;
  /** Runs an LMSP response on a model as a child task and waits for it (see `generate`). */
  generate(request: GenerateRequest): Promise<GenerateOutcome>;
}

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

/**
 * `required`: only ever runs as a task (callers without the Tasks extension get -32021).
 * `optional`: a task for callers that hold it as one (the 2026 extension declared, a 2025-11-25
 * `params.task`), otherwise the call waits for the task's end, and the caller leaving cancels it.
 * `forbidden`: runs inline on the replica that received the call (cheap, synchronous tools).
 */
export type TaskSupport = 'required' | 'optional' | 'forbidden';

/** One round of a multi-round-trip (MRTR) exchange before any task exists. */
export type Prepared<A> = { ask: Record<string, InputRequest> } | { args: A };

export interface ToolDefinition<S extends z.ZodObject = z.ZodObject> {
  name: string;
  description: string;
  inputSchema: S;
  taskSupport: TaskSupport;
  /**
   * Optional MRTR phase, run on the replica before the task is created: ask the caller for input
   * inline, then return the arguments the task runs with. A throw refuses the call at once (an
   * `isError` result, no task); `served` is what this deployment's models can run.
   */
  prepare?(args: z.infer<S>, responses: Record<string, unknown>, served: ServedModels): Prepared<z.infer<S>>;
  run(args: z.infer<S>, ctx: ToolContext): Promise<ToolResult>;
}

/**
 * Refuses a generation the deployment would not run, with LMSP's errors: a model it does not
 * serve (the child task would wait forever) or `max_output_tokens` above its cap. Returns the
 * `max_output_tokens` an LMSP create would store (the cap when none is given).
 */
export function checkGeneration(served: ServedModels, model: string, maxOutputTokens?: number): number {
  servedModel(served, model);
  return outputTokens(served, maxOutputTokens);
}

/** The models a tool's `model` field offers: the served ids and the default for calls that name none. */
export interface ModelChoice {
  ids: readonly string[];
  default?: string;
}

/** The choice of `TASKLINE_MODELS` and `TASKLINE_DEFAULT_MODEL` (which must be one of them). */
export function modelChoice(env: { TASKLINE_MODELS: string; TASKLINE_DEFAULT_MODEL: string }): ModelChoice {
  const ids = env.TASKLINE_MODELS.split(',').filter(Boolean);
  const fallback = env.TASKLINE_DEFAULT_MODEL;
  if (fallback && !ids.includes(fallback))
    throw new Error(`TASKLINE_DEFAULT_MODEL "${fallback}" is not one of TASKLINE_MODELS (${ids.join(', ')})`);
  return { ids, ...(fallback && { default: fallback }) };
}

/**
 * A generation's `model` field, written for the model that calls the tool: an enum of the served
 * models (so it need not guess), with the default when one is configured. Without a choice (a
 * registry that only runs tools) any id passes here and `checkGeneration` refuses unserved ones.
 */
export function modelField(choice?: ModelChoice): z.ZodType<string> {
  const describe = 'The model that generates: one of the models this deployment serves.';
  if (!choice || choice.ids.length === 0) return z.string().min(1).describe(describe);
  const field = z.enum(choice.ids as [string, ...string[]]);
  const described = choice.default
    ? field.default(choice.default).describe(`${describe} Defaults to ${choice.default}.`)
    : field.describe(describe);
  return described as unknown as z.ZodType<string>;
}

/** Thrown by a tool for a failure the caller should see as a protocol error (task `failed`). */
export class ToolFailure extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ToolFailure';
  }
}

/** The tools a deployment offers; the MCP layer lists and calls them, workers run them. */
export class ToolRegistry {
  private readonly tools = new Map<string, ToolDefinition>();

  register<S extends z.ZodObject>(tool: ToolDefinition<S>): this {
    if (this.tools.has(tool.name)) throw new Error(`tool ${tool.name} registered twice`);
    this.tools.set(tool.name, tool as unknown as ToolDefinition);
    return this;
  }

  get(name: string): ToolDefinition | undefined {
    return this.tools.get(name);
  }

  list(): ToolDefinition[] {
    return [...this.tools.values()];
  }
}

export function defineTool<S extends z.ZodObject>(tool: ToolDefinition<S>): ToolDefinition<S> {
  return tool;
}

/** The request a tool task carries in the engine. */
export interface ToolTaskRequest {
  tool: string;
  arguments: Record<string, unknown>;
  /**
   * The client capabilities its questions may use (`elicitation`, `sampling`, `roots`): what the
   * caller declared when it holds the call as a task, none when it waits on the call (nobody can
   * answer then). Absent on tasks an older api wrote, which asked whatever the tool asked.
   */
  capabilities?: Record<string, unknown>;
}

/** The client capabilities an input request can need (MCP ClientCapabilities). */
export const ANSWER_CAPABILITIES = ['elicitation', 'sampling', 'roots'] as const;

/**
 * Whether a caller with `capabilities` can answer `request`: MCP 2025-11-25 (Elicitation: "MUST
 * NOT send" a mode the client did not declare) and MCP 2026-07-28 MRTR (input requests only of the
 * declared kinds). An empty `elicitation: {}` declares form mode. No capabilities recorded: yes.
 */
export function canAnswer(capabilities: Record<string, unknown> | undefined, request: InputRequest): boolean {
  if (capabilities === undefined) return true;
  const declared = (name: string) => {
    const value = capabilities[name];
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : null;
  };
  switch (request.method) {
    case 'elicitation/create': {
      const modes = declared('elicitation');
      if (!modes) return false;
      const mode = typeof request.params.mode === 'string' ? request.params.mode : 'form';
      if (modes.form === undefined && modes.url === undefined) return mode === 'form';
      return modes[mode] !== undefined;
    }
    case 'sampling/createMessage':
      return declared('sampling') !== null;
    case 'roots/list':
      return declared('roots') !== null;
    default:
      return false;
  }
}
