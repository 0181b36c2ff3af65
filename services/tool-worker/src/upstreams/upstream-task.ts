// Calls to upstreams that run tools as tasks themselves (MCP 2025-11-25, Tasks): create once, follow, re-attach after a crash.
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  GetTaskResultSchema,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import { ToolFailure, type Json, type ToolContext } from '@taskline/tool-sdk';
import type { Upstream } from './upstream.js';

/** What the task's checkpoint keeps of the upstream task: enough for a later attempt to find it again. */
export interface UpstreamTaskRef {
  upstreamTask: string;
  /** The Streamable HTTP session the upstream task lives in, if any. */
  session?: string;
}

/** The upstream task an earlier attempt started (its checkpoint, under `onRestart: 'resume'`). */
function earlierRef(resumed: Json | undefined): UpstreamTaskRef | null {
  const ref = resumed as Partial<UpstreamTaskRef> | null | undefined;
  return typeof ref?.upstreamTask === 'string' ? (ref as UpstreamTaskRef) : null;
}

/** Waits `ms`, or rejects when `signal` aborts first; leaves no listener behind either way. */
const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason)));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });

/** Creates the upstream task (`tools/call` with `task`) and checkpoints its id before anything else. */
async function create(
  upstream: Upstream,
  name: string,
  args: Record<string, unknown>,
  ctx: ToolContext,
  meta: Record<string, unknown> | undefined,
): Promise<UpstreamTaskRef> {
  const client = await upstream.connect();
  const created = await client.request(
    {
      method: 'tools/call',
      params: { name, arguments: args, task: { ttl: upstream.timeoutMs() }, ...(meta && { _meta: meta }) },
    },
    CreateTaskResultSchema,
    { signal: ctx.signal, timeout: upstream.timeoutMs() },
  );
  const session = upstream.sessionId;
  const ref = { upstreamTask: created.task.taskId, ...(session !== undefined && { session }) };
  // Before following it: an attempt after a crash re-attaches to this task instead of calling again.
  await ctx.checkpoint(ref as unknown as Json);
  return ref;
}

/**
 * Polls the upstream task at its `pollInterval` until it ends, relaying its `statusMessage`, then
 * reads its result. Bounded by the upstream's timeout. A cancel of the Taskline task cancels it upstream.
 */
async function follow(client: Client, ref: UpstreamTaskRef, ctx: ToolContext, timeoutMs: number) {
  const taskId = ref.upstreamTask;
  const deadline = Date.now() + timeoutMs;
  const options = { signal: ctx.signal, timeout: timeoutMs };
  const onAbort = () => {
    // Only the caller's cancel ends the upstream task: after a lost lease the next attempt re-attaches.
    if (ctx.signal.reason === 'cancel')
      void client
        .request({ method: 'tasks/cancel', params: { taskId } }, GetTaskResultSchema)
        .catch(() => undefined);
  };
  ctx.signal.addEventListener('abort', onAbort, { once: true });
  try {
    let shown: string | undefined;
    for (;;) {
      const task = await client.request(
        { method: 'tasks/get', params: { taskId } },
        GetTaskResultSchema,
        options,
      );
      if (task.statusMessage && task.statusMessage !== shown)
        await ctx.progress((shown = task.statusMessage));
      if (task.status === 'completed' || task.status === 'failed') break;
      if (task.status === 'cancelled')
        throw new ToolFailure(`upstream task ${taskId} was cancelled upstream`);
      if (task.status === 'input_required')
        throw new ToolFailure(`upstream task ${taskId} asks for input, which this gateway does not relay`);
      if (Date.now() > deadline)
        throw new ToolFailure(`upstream task ${taskId} did not end within ${timeoutMs} ms`);
      await sleep(task.pollInterval ?? 1000, ctx.signal);
    }
    const params = { taskId };
    return (await client.request(
      { method: 'tasks/result', params },
      CallToolResultSchema,
      options,
    )) as CallToolResult;
  } finally {
    ctx.signal.removeEventListener('abort', onAbort);
  }
}

/**
 * Runs a call as an upstream task: re-attaches to the task an earlier attempt created (its
 * checkpoint), or creates one. Never calls the tool twice for one Taskline task under `resume`.
 */
export async function runUpstreamTask(
  upstream: Upstream,
  name: string,
  args: Record<string, unknown>,
  ctx: ToolContext,
  meta: Record<string, unknown> | undefined,
): Promise<CallToolResult> {
  return upstream.withSlot(ctx.signal, async () => {
    const earlier = earlierRef(ctx.resumed);
    if (earlier) ctx.log.info('upstream_task_reattached', { upstream: upstream.config.name, ...earlier });
    const ref = earlier ?? (await create(upstream, name, args, ctx, meta));
    const { client, done } = await upstream.inSession(ref.session);
    try {
      return await follow(client, ref, ctx, upstream.timeoutMs());
    } finally {
      await done();
    }
  });
}
