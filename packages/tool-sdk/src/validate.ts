// Checks a tool definition before a worker serves it, and renders its schemas as MCP lists them.
import { z } from 'zod';
import type { ToolDefinition } from './tool.js';

/** MCP 2025-11-25, Tools, tool names: 1 to 128 of A-Z a-z 0-9 _ - . */
export const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

const TASK_SUPPORT = ['required', 'optional', 'forbidden'];
const ON_RESTART = ['fail', 'retry', 'resume'];

/** Why a definition cannot be served; `tool` names it, `problem` says what to fix. */
export class InvalidToolError extends Error {
  constructor(
    readonly tool: string,
    readonly problem: string,
  ) {
    super(`tool ${JSON.stringify(tool)}: ${problem}`);
    this.name = 'InvalidToolError';
  }
}

/** A tool's input and output schemas as JSON Schema (draft 2020-12), the form `tools/list` shows. */
export interface ToolJsonSchemas {
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
}

function jsonSchema(name: string, which: string, schema: unknown): Record<string, unknown> {
  if (!(schema instanceof z.ZodObject))
    throw new InvalidToolError(name, `${which} must be a zod object (z.object({...}))`);
  try {
    // `input`: what a caller sends (defaults optional), which is what the list advertises.
    return z.toJSONSchema(schema, { io: 'input' }) as Record<string, unknown>;
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new InvalidToolError(name, `${which} cannot be shown as JSON Schema: ${why}`);
  }
}

/**
 * Checks everything a worker relies on and returns the tool's JSON schemas; throws an
 * InvalidToolError naming the tool and the problem. Run by the tool worker at start, before it
 * registers or claims anything; run it in a team's own unit tests too.
 */
export function validateTool(tool: ToolDefinition): ToolJsonSchemas {
  const name = typeof tool?.name === 'string' ? tool.name : String(tool?.name);
  if (!TOOL_NAME.test(name)) throw new InvalidToolError(name, 'name must be 1-128 of A-Z a-z 0-9 _ - .');
  if (typeof tool.description !== 'string' || tool.description.length === 0)
    throw new InvalidToolError(name, 'description must be a non-empty string');
  if (!TASK_SUPPORT.includes(tool.taskSupport))
    throw new InvalidToolError(name, `taskSupport must be one of ${TASK_SUPPORT.join(', ')}`);
  if (tool.onRestart !== undefined && !ON_RESTART.includes(tool.onRestart))
    throw new InvalidToolError(name, `onRestart must be one of ${ON_RESTART.join(', ')}`);
  const concurrency = tool.concurrency ?? 1;
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 1024)
    throw new InvalidToolError(name, 'concurrency must be an integer from 1 to 1024');
  if (typeof tool.run !== 'function') throw new InvalidToolError(name, 'run must be a function');
  const inputSchema = jsonSchema(name, 'inputSchema', tool.inputSchema);
  if (tool.outputSchema === undefined) return { inputSchema };
  return { inputSchema, outputSchema: jsonSchema(name, 'outputSchema', tool.outputSchema) };
}

/** Whether `value` looks like a tool definition: how a worker finds the tools a module exports. */
export function isToolDefinition(value: unknown): value is ToolDefinition {
  const v = value as Partial<ToolDefinition> | null;
  return typeof v === 'object' && v !== null && typeof v.name === 'string' && typeof v.run === 'function';
}
