// `taskline tool-worker --module ./dist/tools.js`: the arguments, then the module, then the worker.
import { parseArgs } from 'node:util';
import { loadToolModule } from './load.js';
import { startToolWorker, type ToolWorker } from './start.js';

export const TOOL_WORKER_USAGE =
  'usage: taskline tool-worker --module <path to the built module exporting the tools>';

/**
 * Starts a tool worker from command-line arguments: `--module` wins over TASKLINE_TOOL_MODULE.
 * Throws (the caller exits non-zero) on bad arguments, a module that fails to load, or an invalid tool.
 */
export async function runToolWorker(argv: string[], env: NodeJS.ProcessEnv): Promise<ToolWorker> {
  const { values } = parseArgs({ args: argv, options: { module: { type: 'string' } }, strict: true });
  const module = values.module ?? env.TASKLINE_TOOL_MODULE;
  if (!module) throw new Error(`no tool module given\n${TOOL_WORKER_USAGE}`);
  return startToolWorker({ tools: await loadToolModule(module), env });
}
