// The runtime's side of the public SDK: the registry of served tools, tool-task requests, model checks.
import { z } from 'zod';
import { outputTokens, servedModel, type ServedModels } from '@taskline/engine';
import { TOOLS_MODEL } from '@taskline/control/queues';
import type { InputRequest, OnRestart, PrepareContext, ToolDefinition } from '@taskline/tool-sdk';

/**
 * Refuses a generation the deployment would not run, with LMSP's errors: a model it does not
 * serve (the child task would wait forever) or `max_output_tokens` above its cap. Returns the
 * `max_output_tokens` an LMSP create would store (the cap when none is given).
 */
export function checkGeneration(served: PrepareContext, model: string, maxOutputTokens?: number): number {
  // What `prepare` is handed is the deployment's ServedModels, seen through the SDK's narrower type.
  servedModel(served as ServedModels, model);
  return outputTokens(served as ServedModels, maxOutputTokens);
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

/** Where a registered tool's tasks go and how they restart: its queue (model id) and policy. */
export interface ToolPlacement {
  /** The dispatch queue: `tools` for the built-in tools, `tool:<name>` for a tool worker's. */
  queue: string;
  onRestart: OnRestart;
  /** The version of the tool's schema a task is created against (tool workers' registry entries). */
  version?: string;
}

/** The tools a deployment offers; the MCP layer lists and calls them, workers run them. */
export class ToolRegistry {
  private readonly tools = new Map<string, { tool: ToolDefinition; placement: ToolPlacement }>();

  register<S extends z.ZodObject>(
    tool: ToolDefinition<S, z.ZodObject>,
    placement: Partial<ToolPlacement> = {},
  ): this {
    if (this.tools.has(tool.name)) throw new Error(`tool ${tool.name} registered twice`);
    this.tools.set(tool.name, {
      tool: tool as unknown as ToolDefinition,
      placement: { queue: TOOLS_MODEL, onRestart: tool.onRestart ?? 'fail', ...placement },
    });
    return this;
  }

  get(name: string): ToolDefinition | undefined {
    return this.tools.get(name)?.tool;
  }

  /** Where `name`'s tasks are queued and how they restart; undefined for an unknown tool. */
  placement(name: string): ToolPlacement | undefined {
    return this.tools.get(name)?.placement;
  }

  list(): ToolDefinition[] {
    return [...this.tools.values()].map((t) => t.tool);
  }

  /** A registry with this one's tools and then `more`'s (a name already here keeps this one's). */
  with(more: ToolRegistry): ToolRegistry {
    const both = new ToolRegistry();
    for (const [name, entry] of [...this.tools, ...more.tools])
      if (!both.tools.has(name)) both.tools.set(name, entry);
    return both;
  }
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
  /** The schema version of a tool worker's tool the api validated the arguments against. */
  version?: string;
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

/** The queue of a tool served by tool workers: its own, so dispatch is fair per tool. */
export const toolQueue = (name: string) => `tool:${name}`;
