// `taskline tool-worker --module ./dist/tools.js`: the arguments, then the module, then the worker.
import { parseArgs } from 'node:util';
import { loadToolModule } from './load.js';
import { startToolWorker, type ToolWorker } from './start.js';
import { readUpstreams } from './upstreams/config.js';

export const TOOL_WORKER_USAGE =
  'usage: taskline tool-worker --module <path to the built module exporting the tools>\n' +
  '       taskline tool-worker --upstreams <upstreams.json>   (MCP servers to front, docs/gateway.md)';

/**
 * Starts a tool worker from command-line arguments: `--module` wins over TASKLINE_TOOL_MODULE,
 * `--upstreams` over TASKLINE_UPSTREAMS; either or both. Throws (the caller exits non-zero) on bad
 * arguments, a module that fails to load, an invalid tool or upstream configuration.
 */
export async function runToolWorker(argv: string[], env: NodeJS.ProcessEnv): Promise<ToolWorker> {
  const { values } = parseArgs({
    args: argv,
    options: { module: { type: 'string' }, upstreams: { type: 'string' } },
    strict: true,
  });
  const module = values.module ?? env.TASKLINE_TOOL_MODULE;
  const upstreams = readUpstreams(values.upstreams, env);
  if (!module && upstreams.length === 0)
    throw new Error(`no tool module or upstreams given\n${TOOL_WORKER_USAGE}`);
  const tools = module ? await loadToolModule(module) : [];
  return startToolWorker({ tools, env, upstreams });
}
