// `subscriptions/listen` with task ids: task notifications streamed from the EventHub.
import type { Response } from 'express';
import {
  isTerminal,
  isWellFormedId,
  TasklineError,
  type EventHub,
  type Subscription,
  type TaskStore,
} from '@taskline/engine';
import type { StreamSlot, TenantLimits } from '@taskline/admission';
import type { McpObserver } from './observe.js';
import { rateLimited, rpcError } from './rpc.js';
import { openEventStream, type StillAuthorized, type StreamSettings } from './stream.js';
import { findToolTask } from './toolTasks.js';
import { declaresTasks, detailedTask, TASKS_EXTENSION } from './view.js';

/** The `_meta` key naming the subscription a message belongs to (MCP 2026-07-28, Subscriptions). */
const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';

interface ListenArgs {
  res: Response;
  store: TaskStore;
  hub: EventHub;
  poll: number;
  /** The api's SSE settings (heartbeats renew the open-stream slot). */
  sse: StreamSettings;
  /** Distinct task ids one listen may follow (TASKLINE_MCP_LISTEN_MAX_TASKS). */
  maxTaskIds: number;
  /** The tenant's open-stream cap (TASKLINE_MAX_STREAMS), shared with LMSP event streams. */
  limits: Pick<TenantLimits, 'openStream'>;
  tenant: string;
  id: unknown;
  params: Record<string, unknown>;
  capabilities: unknown;
  observe?: McpObserver;
  stillAuthorized?: StillAuthorized;
  /** When the JWT of the request stops being accepted: the stream is closed then (openEventStream). */
  expiresAt?: number;
}

/** The distinct task ids the listen asks for; or null, answered, when it cannot be served. */
function refusedOrRequested(args: ListenArgs): unknown[] | null {
  const { res, id } = args;
  if (!declaresTasks(args.capabilities)) {
    res.status(400).json({
      jsonrpc: '2.0',
      id,
      error: {
        code: -32021,
        message: 'Listening for task notifications needs the io.modelcontextprotocol/tasks extension.',
        data: { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
      },
    });
    return null;
  }
  const requested = [...new Set((args.params.notifications as { taskIds: unknown[] }).taskIds)];
  if (requested.length > args.maxTaskIds) {
    rpcError(
      res,
      400,
      id,
      -32602,
      `Invalid params: a listen follows at most ${args.maxTaskIds} taskIds (got ${requested.length}); split it into several listens`,
      { maxTaskIds: args.maxTaskIds },
    );
    return null;
  }
  return requested;
}

/** The stream's slot and the tenant's tool tasks among `requested`; or null, answered 429 at the cap. */
async function slotAndTasks(args: ListenArgs, requested: unknown[]) {
  const { store, tenant } = args;
  // The slot and the records together: one round trip for all records (auto-pipelined gets).
  const [slotted, found] = await Promise.allSettled([
    args.limits.openStream(tenant),
    Promise.all(
      requested.map((taskId) =>
        // Unknown and other tenants' ids are left out of the acknowledged filter, never revealed.
        typeof taskId === 'string' && isWellFormedId(taskId, 'task')
          ? findToolTask(store, taskId, tenant)
          : null,
      ),
    ),
  ]);
  if (slotted.status === 'rejected' || found.status === 'rejected') {
    if (slotted.status === 'fulfilled') await slotted.value.release().catch(() => undefined);
    const err = slotted.status === 'rejected' ? slotted.reason : (found as PromiseRejectedResult).reason;
    if (err instanceof TasklineError && err.code === 'rate_limited') {
      rateLimited(args.res, args.id, err);
      return null;
    }
    throw err;
  }
  const slot: StreamSlot = slotted.value;
  return { slot, tasks: found.value.filter((t) => t !== null) };
}

/**
 * `subscriptions/listen` with `notifications.taskIds`: the SDK acknowledges such a filter and closes
 * (SDK issue #2569), so this serves it. Each accepted task is tailed through the EventHub, which
 * reads the task's log in Redis: a change made on any replica reaches this stream. One
 * `notifications/tasks` (a DetailedTask) goes out per visible change; the stream ends with the
 * listen result once every task is terminal, or when the client goes away.
 *
 * A listen is an open stream like an LMSP event stream: it holds a slot under the tenant's
 * TASKLINE_MAX_STREAMS (429 -32005 at the cap), sends a heartbeat comment every
 * TASKLINE_SSE_HEARTBEAT_MS (renewing the slot), and follows at most `maxTaskIds` distinct tasks
 * (-32602 above), whose records are read in one round trip.
 */
export async function serveTaskListen(args: ListenArgs): Promise<void> {
  const { res, store, hub, poll, tenant, id } = args;
  const requested = refusedOrRequested(args);
  if (!requested) return;
  const opened = await slotAndTasks(args, requested);
  if (!opened) return;
  const { slot, tasks } = opened;
  args.observe?.listener(1);
  const subs = new Map<string, Subscription>();
  const stream = openEventStream(res, {
    slot,
    sse: args.sse,
    stillAuthorized: args.stillAuthorized,
    expiresAt: args.expiresAt,
    onClose: () => {
      for (const sub of subs.values()) sub.close();
      args.observe?.listener(-1);
    },
  });
  // MCP 2026-07-28, Subscriptions: the acknowledgement, every notification and the closing result
  // carry the subscription's id (the listen request's), by which a client routes them.
  const _meta = { [SUBSCRIPTION_ID]: id };
  const send = (message: { method: string; params: object }) =>
    stream.send({ ...message, params: { ...message.params, _meta } });
  // The graceful close (Subscriptions, Graceful Closure): the client re-listens or polls.
  const end = () => stream.end({ id, result: { resultType: 'complete', _meta } });
  send({
    method: 'notifications/subscriptions/acknowledged',
    params: { notifications: { taskIds: tasks.map((t) => t.id) } },
  });
  const open = new Set(tasks.map((t) => t.id));
  const last = new Map<string, string>();
  const chains = new Map<string, Promise<void>>();
  const notify = async (taskId: string) => {
    const task = await store.get(taskId, tenant);
    if (stream.ended) return;
    if (task) {
      const view = await detailedTask(store, task, poll);
      const key = JSON.stringify([view.status, view.statusMessage, view.inputRequests]);
      if (last.get(taskId) !== key) {
        last.set(taskId, key);
        send({ method: 'notifications/tasks', params: view });
      }
    }
    // A task gone (expired, deleted) has nothing more to tell either.
    if (!task || isTerminal(task.status)) {
      subs.get(taskId)?.close();
      open.delete(taskId);
      if (open.size === 0) end();
    }
  };
  if (tasks.length === 0 || stream.ended) return end();
  // A failed read or subscription ends the listen: after a task's final event no later event
  // would retry the read, and the stream would only heartbeat, holding its slot.
  try {
    await Promise.all(
      tasks.map(async (task) => {
        chains.set(task.id, notify(task.id).catch(end));
        const sub = await hub.subscribe(task.id, task.seq, () => {
          // Serialised per task, so notifications leave in the order the log recorded them.
          chains.set(
            task.id,
            (chains.get(task.id) ?? Promise.resolve()).then(() => notify(task.id)).catch(end),
          );
        });
        if (stream.ended) sub.close();
        else subs.set(task.id, sub);
      }),
    );
  } catch {
    end();
  }
}
