// Calls to upstreams that run tools as tasks themselves (MCP 2025-11-25, Tasks): create once, follow, relay their questions, re-attach after a crash.
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  ErrorCode,
  GetTaskResultSchema,
  McpError,
  RELATED_TASK_META_KEY,
  type CallToolResult,
  type ElicitRequest,
  type ElicitResult,
} from '@modelcontextprotocol/sdk/types.js';
import { ToolFailure, type InputRequest, type Json, type ToolContext } from '@taskline/tool-sdk';
import { relayedAnswer, type Upstream } from './upstream.js';

/** What the task's checkpoint keeps of the upstream task: enough for a later attempt to find it again. */
export interface UpstreamTaskRef {
  upstreamTask: string;
  /** The Streamable HTTP session the upstream task lives in, if any. */
  session?: string;
  /** The stdio connection (one child) the upstream task lives in, if any: it dies with the child. */
  child?: string;
  /** Questions the upstream task asked so far: the next is the task's input request `upstream-<asked>`. */
  asked?: number;
  /** The key of a question asked and not answered yet (held by the worker whose attempt parked). */
  pending?: string;
}

/** The upstream task an earlier attempt started (its checkpoint, under `onRestart: 'resume'`). */
function earlierRef(resumed: Json | undefined): UpstreamTaskRef | null {
  const ref = resumed as Partial<UpstreamTaskRef> | null | undefined;
  return typeof ref?.upstreamTask === 'string' ? (ref as UpstreamTaskRef) : null;
}

/**
 * A question an upstream task asked while its caller had not answered: the attempt parked, and
 * this worker keeps the upstream request open (its reply is the answer) for the attempt after the
 * answer. By Taskline task id; given up after the upstream's timeout.
 */
interface ParkedQuestion {
  ref: UpstreamTaskRef;
  key: string;
  request: InputRequest;
  reply(answer: ElicitResult): void;
  refuse(err: Error): void;
  /** Closes the connection the question came on (a rejoined session's), once the reply is sent. */
  release(): Promise<void>;
}
const parked = new Map<string, ParkedQuestion>();

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
  const { sessionId: session, childId: child } = upstream;
  const ref = {
    upstreamTask: created.task.taskId,
    ...(session !== undefined && { session }),
    ...(child !== undefined && { child }),
  };
  // Before following it: an attempt after a crash re-attaches to this task instead of calling again.
  await ctx.checkpoint(ref as unknown as Json);
  return ref;
}

/** Ends upstream task `ref` for good (best effort): no attempt will follow it again. */
async function cancelUpstream(upstream: Upstream, ref: UpstreamTaskRef): Promise<void> {
  try {
    const { client, done } = await upstream.inSession(ref.session);
    await client
      .request({ method: 'tasks/cancel', params: { taskId: ref.upstreamTask } }, GetTaskResultSchema)
      .finally(done);
  } catch {
    // Gone already, or unreachable: its own ttl ends it.
  }
}

/**
 * Keeps an upstream question open for the attempt after the caller's answer (the task parked).
 * Given up after the upstream's timeout (the caller never answered, or the task ended or went to
 * another worker): the question is refused and the upstream task cancelled.
 */
function park(
  upstream: Upstream,
  taskId: string,
  question: Omit<ParkedQuestion, 'reply' | 'refuse' | 'release'>,
) {
  return new Promise<ElicitResult>((resolve, reject) => {
    const timer = setTimeout(() => {
      if (parked.get(taskId)?.refuse !== refuse) return;
      parked.delete(taskId);
      refuse(new McpError(ErrorCode.RequestTimeout, 'taskline: the caller did not answer in time'));
      void cancelUpstream(upstream, question.ref).finally(() => entry.release());
    }, upstream.timeoutMs());
    timer.unref();
    const refuse = (err: Error) => {
      clearTimeout(timer);
      reject(err);
    };
    const reply = (answer: ElicitResult) => {
      clearTimeout(timer);
      resolve(answer);
    };
    const entry: ParkedQuestion = { ...question, reply, refuse, release: async () => undefined };
    parked.set(taskId, entry);
  });
}

/** The question as the caller sees it: without the upstream's task id, which names nothing here. */
function callerRequest(params: ElicitRequest['params']): InputRequest {
  const { [RELATED_TASK_META_KEY]: _upstreamTask, ...meta } = params._meta ?? {};
  const { _meta, ...rest } = params;
  return {
    method: 'elicitation/create',
    params: { ...rest, ...(Object.keys(meta).length > 0 && { _meta: meta }) },
  };
}

/**
 * Relays the questions upstream task `ref` asks as the task's input requests `upstream-<n>`
 * (numbered over the task's life, kept in the checkpoint). Asked the first time, the attempt
 * parks and the question stays open on this worker until the answer's attempt replies with it.
 */
function asker(upstream: Upstream, ref: UpstreamTaskRef, ctx: ToolContext) {
  return async (params: ElicitRequest['params']): Promise<ElicitResult> => {
    const key = `upstream-${ref.asked ?? 0}`;
    ref.asked = (ref.asked ?? 0) + 1;
    const request = callerRequest(params);
    await ctx.checkpoint({ ...ref, pending: key } as unknown as Json);
    let answers: Record<string, unknown>;
    try {
      answers = await ctx.ask({ [key]: request });
    } catch (err) {
      if (ctx.signal.reason !== 'parked') throw err;
      return park(upstream, ctx.taskId, { ref: { ...ref }, key, request });
    }
    await ctx.checkpoint(ref as unknown as Json);
    return relayedAnswer(answers, key, upstream.config.name);
  };
}

/** Whether upstream task `ref` can still be reached: not once the stdio child it lived in is gone (logged). */
async function alive(upstream: Upstream, ref: UpstreamTaskRef, ctx: ToolContext): Promise<boolean> {
  await upstream.connect();
  if (ref.child === upstream.childId) return true;
  ctx.log.warn('upstream_task_lost', {
    upstream: upstream.config.name,
    ...ref,
    why: 'it died with its stdio child',
  });
  return false;
}

/**
 * The caller's answer to the question this worker held parked, replied upstream; the task it
 * belongs to, or null when that died meanwhile with its stdio child (then the tool is called
 * again, and its same question gets the recorded answer at once).
 */
async function answerParked(
  upstream: Upstream,
  question: ParkedQuestion,
  ctx: ToolContext,
): Promise<UpstreamTaskRef | null> {
  // Answered already (that is what started this attempt): this returns at once.
  const answers = await ctx.ask({ [question.key]: question.request });
  parked.delete(ctx.taskId);
  if (!(await alive(upstream, question.ref, ctx))) {
    question.refuse(new Error('the upstream task is gone'));
    return null;
  }
  try {
    question.reply(relayedAnswer(answers, question.key, upstream.config.name));
  } catch (err) {
    question.refuse(err as Error);
  }
  await ctx.checkpoint(question.ref as unknown as Json);
  return question.ref;
}

/**
 * The upstream task an earlier attempt started, if this attempt can follow it: not when it lived
 * in a stdio child that is gone (a crash takes the child along), nor when a question of it is held
 * by another worker. Then the tool is called again, as `on_restart` allows (docs/gateway.md).
 */
async function reattachable(upstream: Upstream, ctx: ToolContext): Promise<UpstreamTaskRef | null> {
  const earlier = earlierRef(ctx.resumed);
  if (!earlier || !(await alive(upstream, earlier, ctx))) return null;
  const fields = { upstream: upstream.config.name, ...earlier };
  if (earlier.pending !== undefined) {
    ctx.log.warn('upstream_task_lost', { ...fields, why: 'its open question is held elsewhere' });
    await cancelUpstream(upstream, earlier);
    return null;
  }
  ctx.log.info('upstream_task_reattached', fields);
  return earlier;
}

/** `tasks/result`: the upstream task's result once it ends; its questions arrive on the way. */
const resultOf = (client: Client, taskId: string, options: { signal: AbortSignal; timeout: number }) =>
  client.request(
    { method: 'tasks/result', params: { taskId } },
    CallToolResultSchema,
    options,
  ) as Promise<CallToolResult>;

/**
 * Polls the upstream task at its `pollInterval` until it ends, relaying its `statusMessage`, then
 * reads its result. Once it asks for input, `tasks/result` is opened: the upstream sends its
 * questions on it (MCP 2025-11-25, Tasks: input_required). Bounded by the upstream's timeout. A
 * cancel of the Taskline task cancels it upstream.
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
  let result: Promise<CallToolResult> | undefined;
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
      if (task.status === 'input_required' && !result) {
        result = resultOf(client, taskId, options);
        // Awaited below; until then its failure (a park aborts it) must not go unhandled.
        result.catch(() => undefined);
      }
      if (Date.now() > deadline)
        throw new ToolFailure(`upstream task ${taskId} did not end within ${timeoutMs} ms`);
      await sleep(task.pollInterval ?? 1000, ctx.signal);
    }
    return await (result ?? resultOf(client, taskId, options));
  } finally {
    ctx.signal.removeEventListener('abort', onAbort);
  }
}

/**
 * Runs a call as an upstream task: answers the question an earlier attempt parked on, or
 * re-attaches to the task an earlier attempt created (its checkpoint), or creates one. Never calls
 * the tool twice for one Taskline task under `resume` while its upstream task can be reached.
 */
export async function runUpstreamTask(
  upstream: Upstream,
  name: string,
  args: Record<string, unknown>,
  ctx: ToolContext,
  meta: Record<string, unknown> | undefined,
): Promise<CallToolResult> {
  return upstream.withSlot(ctx.signal, async () => {
    const held = parked.get(ctx.taskId);
    const earlier = held ? await answerParked(upstream, held, ctx) : await reattachable(upstream, ctx);
    const ref = earlier ?? (await create(upstream, name, args, ctx, meta));
    const { client, done } = await upstream.inSession(ref.session);
    const stopAsking = upstream.askedBy(ref.upstreamTask, asker(upstream, ref, ctx));
    try {
      return await follow(client, ref, ctx, upstream.timeoutMs());
    } finally {
      stopAsking();
      // A question this attempt parked is replied on this connection: it stays open until then.
      const asked = parked.get(ctx.taskId);
      if (asked && asked !== held) asked.release = done;
      else await done();
      // Followed to its end since the reply: the connection the answered question came on has served.
      await held?.release();
    }
  });
}
