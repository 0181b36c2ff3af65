// The MCP 2026-07-28 server of one request: the tools and the Tasks extension's methods.
import { z } from 'zod';
import { recordInputWait, type IncomingTrace } from '@taskline/tracing';
import {
  inputRequired,
  McpServer,
  MissingRequiredClientCapabilityError,
  ProtocolError,
  type ServerContext,
} from '@modelcontextprotocol/server';
import type { Admission, TaskReservation } from '@taskline/admission';
import {
  redisUnavailableReason,
  TasklineError,
  type ServedModels,
  type TaskRecord,
  type TaskStore,
} from '@taskline/engine';
import type { ToolDefinition, ToolRegistry } from '@taskline/tools';
import type { McpExtensions } from './extensions.js';
import { inlineContext } from './inline.js';
import { SUPPORTED_VERSIONS } from './ladder.js';
import type { McpObserver, RequestOutcome } from './observe.js';
import { awaitToolResult, createToolTask, findToolTask, type ProgressParams } from './toolTasks.js';
import {
  CLIENT_CAPABILITIES_KEY,
  declaresTasks,
  detailedTask,
  taskFields,
  TASKS_EXTENSION,
  traceMeta,
} from './view.js';

export const missingTasks = () =>
  new MissingRequiredClientCapabilityError(
    { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
    'This request needs the io.modelcontextprotocol/tasks extension.',
  );
/** Unknown, expired and other tenants' tasks all read the same. */
const unknownTask = () => new ProtocolError(-32602, 'Unknown or expired taskId');

export interface ServerDeps {
  store: TaskStore;
  admission: Admission;
  tools: ToolRegistry;
  poll: number;
  tenant: string;
  /** This call's place under the tenant's unfinished-task cap, when it creates a task. */
  reservation?: TaskReservation;
  /** Where a handler notes a Redis "try again", so the router answers 503 (see RequestOutcome). */
  outcome?: RequestOutcome;
  /** The models and output cap a tool's `prepare` checks generations against. */
  served: ServedModels;
  /** What the router's builder added beyond `tools`. */
  extensions: McpExtensions;
  observe?: McpObserver;
  /** The trace context a task this call creates continues. */
  trace?: IncomingTrace;
}

/** The MCP 2026-07-28 server of one request: the tools, and the Tasks extension's methods over the engine's tasks. */
export function buildServer(deps: ServerDeps): McpServer {
  const server = new McpServer(
    { name: 'taskline', version: '0.1.0' },
    {
      capabilities: { tools: {}, extensions: { [TASKS_EXTENSION]: {} } },
      ...(deps.extensions.requestState && { requestState: deps.extensions.requestState }),
    },
  );
  widenDiscover(server);
  deps.extensions.register?.(server);
  registerTools(server, deps);
  const taskParams = { params: z.looseObject({ taskId: z.string() }) };
  server.server.setRequestHandler('tasks/get', taskParams, ({ taskId }, ctx) => getTask(deps, taskId, ctx));
  server.server.setRequestHandler('tasks/update', taskParams, ({ taskId }, ctx) =>
    noting(deps, () => updateTask(deps, taskId, ctx)),
  );
  server.server.setRequestHandler('tasks/cancel', taskParams, ({ taskId }, ctx) =>
    noting(deps, () => cancelTask(deps, taskId, ctx)),
  );
  return server;
}

/** Runs a handler, noting a Redis "try again" it fails with before the SDK reshapes the error. */
async function noting<T>(deps: ServerDeps, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    const reason = redisUnavailableReason(err);
    if (reason && deps.outcome) deps.outcome.unavailable = reason;
    throw err;
  }
}

/**
 * server/discover lists every revision /mcp serves, as -32022 does (MCP 2026-07-28, Versioning;
 * the official conformance suite checks that the two agree). The SDK's discover lists only its
 * modern revisions and has no option for more, so its answer is widened here.
 */
function widenDiscover(server: McpServer): void {
  const sdk = server.server as unknown as { _ondiscover(): Record<string, unknown> };
  const discover = sdk._ondiscover.bind(sdk);
  sdk._ondiscover = () => ({ ...discover(), supportedVersions: SUPPORTED_VERSIONS });
}

/** Every tool of the registry, each call run by `callTool`. */
function registerTools(server: McpServer, deps: ServerDeps): void {
  for (const tool of deps.tools.list()) {
    server.registerTool(
      tool.name,
      {
        ...(tool.title !== undefined && { title: tool.title }),
        description: tool.description,
        inputSchema: tool.inputSchema,
      },
      (args: Record<string, unknown>, ctx: ServerContext) =>
        noting(deps, () => callTool(deps, tool, args, ctx)) as never,
    );
  }
}

/** The Tasks methods answer only a client that declared the extension. */
function requireTasks(ctx: ServerContext): void {
  if (!declaresTasks(ctx.mcpReq.envelope?.[CLIENT_CAPABILITIES_KEY as never])) throw missingTasks();
}

/** The caller's tool task, or the one error every unknown, expired or other tenant's task reads as. */
async function find(deps: ServerDeps, taskId: string): Promise<TaskRecord> {
  const task = await findToolTask(deps.store, taskId, deps.tenant);
  if (!task) throw unknownTask();
  return task;
}

/** `tasks/get`: the task, as the Tasks extension shows it. */
async function getTask(deps: ServerDeps, taskId: string, ctx: ServerContext) {
  requireTasks(ctx);
  return (await noting(deps, async () =>
    detailedTask(deps.store, await find(deps, taskId), deps.poll),
  )) as never;
}

/** `tasks/update`: the client's answers to the task's input requests. */
async function updateTask(deps: ServerDeps, taskId: string, ctx: ServerContext) {
  requireTasks(ctx);
  const task = await find(deps, taskId);
  const answers = ctx.mcpReq.inputResponses ?? {};
  try {
    const { status } = await deps.store.provideInput(taskId, deps.tenant, answers);
    recordInputWait(task, status);
  } catch (err) {
    if (err instanceof TasklineError && err.code === 'task_not_found') throw unknownTask();
    throw err;
  }
  return {} as never;
}

/** `tasks/cancel`: acknowledged once asked, a finished task's included. */
async function cancelTask(deps: ServerDeps, taskId: string, ctx: ServerContext) {
  requireTasks(ctx);
  await find(deps, taskId);
  try {
    await deps.store.cancel(taskId, deps.tenant);
  } catch (err) {
    if (!(err instanceof TasklineError)) throw err;
    if (err.code === 'task_not_found') throw unknownTask();
    // Cancelling a finished task is acknowledged all the same: the ack promises nothing more.
    if (err.code !== 'task_not_cancelable') throw err;
  }
  return {} as never;
}

async function callTool(
  deps: ServerDeps,
  tool: ToolDefinition,
  rawArgs: Record<string, unknown>,
  ctx: ServerContext,
): Promise<unknown> {
  const { store, poll, tenant } = deps;
  let args = rawArgs;
  if (tool.prepare) {
    const prepared = tool.prepare(args, ctx.mcpReq.inputResponses ?? {}, deps.served);
    if ('ask' in prepared) return inputRequired({ inputRequests: prepared.ask as never });
    args = prepared.args;
  }
  if (tool.taskSupport === 'forbidden') return tool.run(args, inlineContext(tenant, ctx.mcpReq.signal));
  const declared = ctx.mcpReq.envelope?.[CLIENT_CAPABILITIES_KEY as never];
  const asTask = declaresTasks(declared);
  const placement = deps.tools.placement(tool.name)!;
  const task = await createToolTask(
    store,
    tenant,
    tool.name,
    placement,
    args,
    deps,
    asTask ? declared : undefined,
  );
  // `create` returns once the task is in Redis: any replica's tasks/get resolves it from now on.
  if (asTask) {
    return { resultType: 'task', ...taskFields(task, poll), ...traceMeta(task) };
  }
  // A caller without the extension waits for the task: the work still runs durably on a worker.
  return awaitToolResult(deps.admission, task, ctx.mcpReq.signal, progressNotifier(ctx));
}

/** Sends the tool's progress on the call's own stream when the caller gave a progressToken. */
function progressNotifier(ctx: ServerContext): ((progress: ProgressParams) => void) | undefined {
  const progressToken = ctx.mcpReq._meta?.progressToken;
  if (progressToken === undefined) return undefined;
  return (progress) =>
    // Best effort: a notification lost with a leaving caller changes nothing of the task.
    void ctx.mcpReq
      .notify({ method: 'notifications/progress', params: { progressToken, ...progress } })
      .catch(() => undefined);
}
