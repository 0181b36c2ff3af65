// The 2025-11-25 experimental tasks over the engine's tasks: get, result, list, cancel.
import { randomBytes } from 'node:crypto';
import { recordInputWait, tracingOn, type IncomingTrace } from '@taskline/tracing';
import type { Response } from 'express';
import {
  isTerminal,
  TasklineError,
  type EventHub,
  type ServedModels,
  type Subscription,
  type TaskRecord,
  type TaskStore,
} from '@taskline/engine';
import { callerLeft, type Admission, type StreamSlot, type TaskReservation } from '@taskline/admission';
import { canAnswer, type InputRequest, type ToolDefinition, type ToolRegistry } from '@taskline/tools';
import type { McpObserver } from '../observe.js';
import { awaitToolResult, createToolTask, findToolTask, listToolTasks } from '../toolTasks.js';
import { progressReply } from './progress.js';
import { MCP_ERRORS } from '../errors.js';
import { rateLimited, rpcError } from '../rpc.js';
import { openEventStream, streamFailed, type StillAuthorized, type StreamSettings } from '../stream.js';
import { traceMeta } from '../view.js';
import { cancelUnlessEnded, type LegacyCallCancels, type RequestId } from './cancel.js';
import { legacyTask, RELATED_TASK } from './wire.js';

/** What one 2025-era request runs with: the engine, the caller's tenant and the HTTP exchange. */
export interface LegacyCall {
  store: TaskStore;
  hub: EventHub;
  admission: Admission;
  tools: ToolRegistry;
  poll: number;
  /** The SSE settings of `tasks/result` streams. */
  sse: StreamSettings;
  served: ServedModels;
  tenant: string;
  /** The request's session (`Mcp-Session-Id`): a plain call's cancel names the request within it. */
  session: string;
  /** The client capabilities the session declared in `initialize`: what its tasks may ask. */
  clientCapabilities: Record<string, unknown>;
  cancels: LegacyCallCancels;
  res: Response;
  id: unknown;
  /** This call's place under the tenant's unfinished-task cap (admission step), if it creates a task. */
  reservation?: TaskReservation;
  /** Asked on each heartbeat of a `tasks/result` stream (see openEventStream). */
  stillAuthorized?: StillAuthorized;
  /** When the request's JWT stops being accepted: a `tasks/result` stream is closed then (see openEventStream). */
  expiresAt?: number;
  observe?: McpObserver;
  /** The trace context a task this call creates continues. */
  trace?: IncomingTrace;
}

/** Page size of `tasks/list`. */
const LIST_PAGE = 50;
/** JSON-RPC id prefix of the input requests `tasks/result` sends: `<prefix><taskId>:<stream tag>:<key>`. */
export const INPUT_ID_PREFIX = 'taskline-input:';

class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}
/** Unknown, expired and other tenants' tasks all read the same. */
const unknownTask = () => new RpcError(MCP_ERRORS.task_not_found.rpc, 'Unknown or expired taskId');

const reply = (call: LegacyCall, result: unknown) => call.res.json({ jsonrpc: '2.0', id: call.id, result });

async function find(call: LegacyCall, taskId: unknown): Promise<TaskRecord> {
  const task = typeof taskId === 'string' ? await findToolTask(call.store, taskId, call.tenant) : null;
  if (!task) throw unknownTask();
  return task;
}

/** The 2025-11-25 `tasks/*` methods and engine tool calls; false when `method` is not one of them. */
export async function serveLegacyTaskMethod(
  call: LegacyCall,
  method: string,
  params: Record<string, unknown>,
): Promise<boolean> {
  try {
    switch (method) {
      case 'tools/call': {
        // The SDK v1 would answer a name of another type with -32603 and its schema's dump.
        if (typeof params.name !== 'string')
          throw new RpcError(-32602, 'Invalid params: name must be a string');
        const tool = call.tools.get(params.name);
        if (!tool || tool.taskSupport === 'forbidden') return false;
        await callTool(call, tool, params);
        return true;
      }
      case 'tasks/get':
        reply(call, legacyTask(await find(call, params.taskId), call.poll));
        return true;
      case 'tasks/list':
        await listTasks(call, params.cursor);
        return true;
      case 'tasks/cancel':
        await cancelTask(call, params.taskId);
        return true;
      case 'tasks/result':
        await taskResult(call, await find(call, params.taskId));
        return true;
      default:
        return false;
    }
  } catch (err) {
    if (err instanceof RpcError) {
      rpcError(call.res, 200, call.id, err.code, err.message, err.data);
      return true;
    }
    throw err;
  }
}

/**
 * `tools/call` of a tool that runs as an engine task. Task-augmented (`params.task`): the
 * `CreateTaskResult`, sent once the task is in Redis, so any replica's `tasks/get` resolves it.
 * Otherwise the call waits for the task and the caller leaving cancels it (a tool that requires a
 * task refuses, as the 2025-11-25 tools section asks, with -32601; the built-in tools are
 * `optional`, so 2025-06-18 hosts and plain `callTool()` callers can use them).
 */
async function callTool(call: LegacyCall, tool: ToolDefinition, params: Record<string, unknown>) {
  const augmented = typeof params.task === 'object' && params.task !== null;
  if (!augmented && tool.taskSupport === 'required') {
    throw new RpcError(-32601, `Tool ${tool.name} requires task augmentation (taskSupport: 'required')`);
  }
  const parsed = tool.inputSchema.safeParse(params.arguments ?? {});
  if (!parsed.success) {
    throw new RpcError(-32602, `Invalid arguments for tool ${tool.name}: ${parsed.error.message}`);
  }
  let args = parsed.data as Record<string, unknown>;
  if (tool.prepare) {
    let prepared;
    try {
      prepared = tool.prepare(args, {}, call.served);
    } catch (err) {
      const text = err instanceof Error ? err.message : String(err);
      // A task-augmented request gets a CreateTaskResult or an error (MCP 2025-11-25, Tasks,
      // Result Retrieval), so a refusal is -32602 there; a plain call gets, as on the 2026
      // surface, a tool error the model can read.
      if (augmented) throw new RpcError(-32602, text);
      return reply(call, { content: [{ type: 'text', text }], isError: true });
    }
    if ('ask' in prepared) {
      throw new RpcError(-32602, `Tool ${tool.name} needs input before it runs: call it over MCP 2026-07-28`);
    }
    args = prepared.args;
  }
  const task = await createToolTask(
    call.store,
    call.tenant,
    tool.name,
    call.tools.placement(tool.name)!,
    args,
    call,
    augmented ? call.clientCapabilities : undefined,
  );
  if (augmented) return reply(call, { task: legacyTask(task, call.poll), ...traceMeta(task) });
  // MCP 2025-11-25 Cancellation: the request's `notifications/cancelled`, on any replica, cancels its task.
  const tie = await call.cancels.track(call.session, call.id as RequestId, task.id);
  const answer = progressReply(call.res, call.id, params._meta);
  try {
    if (tie.cancelled) await cancelUnlessEnded(call.store, task.id, call.tenant);
    answer.reply(await awaitToolResult(call.admission, task, callerLeft(call.res), answer.notify));
  } catch (err) {
    if (!answer.failed(err)) throw err;
  } finally {
    await tie.release();
  }
}

async function listTasks(call: LegacyCall, cursor: unknown) {
  if (cursor !== undefined && typeof cursor !== 'string') throw new RpcError(-32602, 'Invalid cursor');
  let page;
  try {
    page = await listToolTasks(call.store, call.tenant, cursor, LIST_PAGE);
  } catch (err) {
    if (err instanceof Error && err.message === 'invalid cursor')
      throw new RpcError(-32602, 'Invalid cursor');
    throw err;
  }
  reply(call, {
    tasks: page.tasks.map((t) => legacyTask(t, call.poll)),
    ...(page.nextCursor && { nextCursor: page.nextCursor }),
  });
}

/** 2025-11-25: a terminal task cannot be cancelled (-32602); the answer is the task after the request. */
async function cancelTask(call: LegacyCall, taskId: unknown) {
  const task = await find(call, taskId);
  // A `cancelling` task already reads `cancelled` here (see legacyTask).
  if (isTerminal(task.status) || task.status === 'cancelling') {
    throw new RpcError(
      MCP_ERRORS.task_not_cancelable.rpc,
      `Cannot cancel task in terminal status: ${legacyTask(task, call.poll).status}`,
    );
  }
  let after: TaskRecord;
  try {
    after = (await call.store.cancel(task.id, call.tenant)).task;
  } catch (err) {
    if (err instanceof TasklineError && err.code === 'task_not_found') throw unknownTask();
    if (err instanceof TasklineError && err.code === 'task_not_cancelable') {
      // It ended meanwhile: the first commit won.
      throw new RpcError(MCP_ERRORS.task_not_cancelable.rpc, 'Cannot cancel task in terminal status');
    }
    throw err;
  }
  reply(call, legacyTask(after, call.poll));
}

/** The outcome `tasks/result` answers with: the tool's result, or the error the call would have had. */
function outcome(task: TaskRecord): {
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
} {
  if (task.status === 'succeeded') {
    const result = task.result as { _meta?: Record<string, unknown> };
    return { result: { ...result, _meta: { ...result._meta, [RELATED_TASK]: { taskId: task.id } } } };
  }
  if (task.status === 'cancelled') return { error: { code: -32603, message: 'The task was cancelled.' } };
  return {
    error: {
      code: -32603,
      message: task.error?.detail ?? 'The task failed.',
      data: { code: task.error?.code ?? 'internal_error' },
    },
  };
}

/**
 * `tasks/result`: blocks until the task is terminal, then answers with its outcome. Meanwhile the
 * response is an open stream like a `subscriptions/listen` (a place under TASKLINE_MAX_STREAMS,
 * heartbeats), an SSE stream carrying `notifications/tasks/status` on every visible change, and,
 * while the task is `input_required`, each open question as a server request (elicitation and the
 * like) tagged with the related-task metadata. Its JSON-RPC id names the task, the stream and the
 * question, so the client's answer, POSTed to any replica, is stored durably as `tasks/update` stores it.
 */
async function taskResult(call: LegacyCall, first: TaskRecord) {
  const { store, hub, res, tenant } = call;
  if (isTerminal(first.status)) return res.json({ jsonrpc: '2.0', id: call.id, ...outcome(first) });
  let slot: StreamSlot;
  try {
    slot = await call.admission.limits.openStream(tenant);
  } catch (err) {
    if (err instanceof TasklineError && err.code === 'rate_limited')
      return void rateLimited(res, call.id, err);
    throw err;
  }
  let sub: Subscription | null = null;
  const stream = openEventStream(res, {
    slot,
    sse: call.sse,
    stillAuthorized: call.stillAuthorized,
    expiresAt: call.expiresAt,
    onClose: () => sub?.close(),
  });
  const { send } = stream;
  // Server request ids must not repeat in a session (MCP 2025-11-25, Basic, Requests), and a
  // session may follow the task on several streams: each stream's questions carry its own tag.
  const streamTag = randomBytes(6).toString('base64url');
  const asked = new Set<string>();
  let lastView = '';
  const check = async () => {
    const task = await store.get(first.id, tenant);
    if (stream.ended) return;
    if (!task)
      return stream.end({ id: call.id, error: { code: -32602, message: 'Unknown or expired taskId' } });
    const view = legacyTask(task, call.poll);
    const key = JSON.stringify([view.status, view.statusMessage]);
    if (key !== lastView) {
      lastView = key;
      send({ method: 'notifications/tasks/status', params: view });
    }
    if (task.status === 'input_required') {
      const open = (await store.openInputRequests(task.id)) as Record<string, InputRequest>;
      for (const [question, request] of Object.entries(open)) {
        // A question of a task created elsewhere that this session cannot answer is not put to it.
        if (asked.has(question) || !canAnswer(call.clientCapabilities, request)) continue;
        asked.add(question);
        send({
          id: `${INPUT_ID_PREFIX}${task.id}:${streamTag}:${question}`,
          method: request.method,
          params: { ...request.params, _meta: { [RELATED_TASK]: { taskId: task.id } } },
        });
      }
    }
    if (isTerminal(task.status)) stream.end({ id: call.id, ...outcome(task) });
  };
  // A failed read (or subscription) after the headers went out ends the stream: after the task's
  // final event no later event would retry it, and the stream would only heartbeat, holding its slot.
  const failed = () => stream.end(streamFailed(call.id));
  if (stream.ended) return;
  let chain = check().catch(failed);
  try {
    sub = await hub.subscribe(first.id, first.seq, () => {
      // Serialised, so the stream follows the task's log in order.
      chain = chain.then(check).catch(failed);
    });
  } catch {
    return failed();
  }
  if (stream.ended) sub.close();
  await chain;
}

/**
 * A client's answer to an input request `tasks/result` sent (`INPUT_ID_PREFIX` id): stored with
 * the engine's `provideInput`, exactly like a 2026 `tasks/update`. An error answer declines.
 * Unknown ids, other tenants' tasks and already answered questions are ignored.
 */
export async function acceptInputAnswer(
  store: TaskStore,
  tenant: string,
  message: { id: string; result?: unknown; error?: unknown },
): Promise<void> {
  const [taskId, , ...question] = message.id.slice(INPUT_ID_PREFIX.length).split(':');
  if (question.length === 0) return;
  const answer = message.error !== undefined ? { action: 'decline' } : message.result;
  try {
    // Traced, the wait this answer may end is a span: the record before it says since when.
    const before = tracingOn() ? await store.get(taskId!, tenant) : null;
    const { status } = await store.provideInput(taskId!, tenant, { [question.join(':')]: answer });
    if (before) recordInputWait(before, status);
  } catch (err) {
    if (!(err instanceof TasklineError && err.code === 'task_not_found')) throw err;
  }
}
