// Loading a team's tool module and checking its tools: everything that must hold before a worker registers.
import { createHash } from 'node:crypto';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  isToolDefinition,
  validateTool,
  InvalidToolError,
  type ToolDefinition,
  type ToolJsonSchemas,
} from '@taskline/tool-sdk';
import type { LiveToolEntry } from '@taskline/tools';

/**
 * The tools a module exports: a default export that is a tool or an array of tools, and every
 * named export that is a tool. A module that fails to load throws its own error, named.
 */
export async function loadToolModule(path: string): Promise<ToolDefinition[]> {
  let module: Record<string, unknown>;
  try {
    module = (await import(pathToFileURL(resolve(path)).href)) as Record<string, unknown>;
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new Error(`tool module ${path} failed to load: ${why}`, { cause: err });
  }
  const exported = Object.values(module).flatMap((v) => (Array.isArray(v) ? v : [v]));
  const tools = [...new Set(exported.filter(isToolDefinition))];
  if (tools.length === 0)
    throw new Error(`tool module ${path} exports no tool (defineTool from @taskline/tool-sdk)`);
  return tools;
}

/**
 * Checks every tool (validateTool) and that names are unique; a tool worker cannot run a tool
 * inline (`taskSupport: 'forbidden'` runs on the api replica, which does not have its code).
 * Returns the registry entries, `version` given or a hash of each tool's schemas and settings.
 * `listed` overrides the JSON schemas a tool is listed with (a gateway's upstream schemas, as the
 * upstream wrote them).
 */
export function checkTools(
  tools: ToolDefinition[],
  version: string,
  listed: ReadonlyMap<string, ToolJsonSchemas> = new Map(),
): Omit<LiveToolEntry, 'slots'>[] {
  const names = new Set<string>();
  return tools.map((tool) => {
    const checked = validateTool(tool);
    const schemas = listed.get(tool.name) ?? checked;
    if (names.has(tool.name)) throw new InvalidToolError(tool.name, 'defined twice');
    names.add(tool.name);
    if (tool.taskSupport === 'forbidden')
      throw new InvalidToolError(
        tool.name,
        "taskSupport 'forbidden' runs inline on the api: a tool worker serves 'required' or 'optional' tools",
      );
    const settings = {
      ...(tool.title !== undefined && { title: tool.title }),
      description: tool.description,
      ...schemas,
      taskSupport: tool.taskSupport,
      onRestart: tool.onRestart ?? 'fail',
    };
    const hash = createHash('sha256').update(JSON.stringify(settings)).digest('hex').slice(0, 12);
    return { name: tool.name, ...settings, version: version || hash };
  });
}
