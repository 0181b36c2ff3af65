/**
 * Item 10: the dispatch overhead of a tool on a separate tool worker next to a built-in tool's, in
 * one run on one stack: from the client's MCP `tools/call` to the moment the tool's `run` starts.
 * The no-op tool (noop-tool.ts) answers when its `run` was entered; the built-in `generate`'s
 * first act in `run` is to create its child generation, whose record says when (`created_at`).
 * Calls go one at a time, alternating the two tools, so neither waits behind the other.
 */
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { idempotencyKey, taskKeys } from '@taskline/engine/keys';
import { API_KEY, TENANT } from './stack.js';
import { nowMs, round, sleep, summarize, type Summary } from './stats.js';
import { waitEnded } from './taskline.js';

export const NOOP_TOOL = 'bench_noop';

export interface ToolDispatchResult {
  calls: number;
  /** ms from the client's `tools/call` to the start of `run`, per side. */
  worker: Summary;
  builtin: Summary;
  /** worker p50 / built-in p50, and the same at p99. */
  p50Ratio: number;
  p99Ratio: number;
}

/** One MCP 2026-07-28 `tools/call` as a task (the Tasks extension); resolves with its task id. */
async function callAsTask(apiUrl: string, name: string, args: Record<string, unknown>): Promise<string> {
  const res = await fetch(`${apiUrl}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${API_KEY}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-method': 'tools/call',
      'mcp-name': name,
      'mcp-protocol-version': '2026-07-28',
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: {
        name,
        arguments: args,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientInfo': { name: 'bench', version: '1' },
          'io.modelcontextprotocol/clientCapabilities': {
            extensions: { 'io.modelcontextprotocol/tasks': {} },
          },
        },
      },
    }),
  });
  const text = await res.text();
  const json = text.startsWith('{') ? text : (/^data: (.*)$/m.exec(text)?.[1] ?? '{}');
  const taskId = (JSON.parse(json) as { result?: { taskId?: string } }).result?.taskId;
  if (!taskId) throw new Error(`tools/call ${name} answered ${res.status}: ${text.slice(0, 300)}`);
  return taskId;
}

/** ms from `calledAt` to the no-op's run start, read from its result once it ended. */
async function noopDelay(redis: Redis, apiUrl: string): Promise<number> {
  const calledAt = nowMs();
  const id = await callAsTask(apiUrl, NOOP_TOOL, {});
  await waitEnded(redis, [id], 5);
  const result = JSON.parse((await redis.hget(taskKeys(id).task, 'result')) ?? 'null') as {
    structuredContent?: { runStartedAt?: number };
  } | null;
  const startedAt = result?.structuredContent?.runStartedAt;
  if (startedAt === undefined) throw new Error(`${NOOP_TOOL} task ${id} has no runStartedAt`);
  return startedAt - calledAt;
}

/** ms from `calledAt` to the creation of `generate`'s child (the first thing its run does). */
async function builtinDelay(redis: Redis, apiUrl: string): Promise<number> {
  const calledAt = nowMs();
  const id = await callAsTask(apiUrl, 'generate', { model: 'instant', input: 'bench', max_output_tokens: 1 });
  await waitEnded(redis, [id], 5);
  // The runner creates child n under (task, n) (packages/tools: an idempotent create).
  const hash = createHash('sha256').update(`tool:${id}:0`).digest('hex');
  const child = await redis.hget(idempotencyKey(TENANT, hash), 'task');
  const createdAt = child ? Number(await redis.hget(taskKeys(child).task, 'created_at')) : NaN;
  if (!Number.isFinite(createdAt)) throw new Error(`generate task ${id} has no child generation`);
  return createdAt - calledAt;
}

/** Waits until the api lists the tool worker's no-op (its announcement, then the api's list cache). */
async function untilListed(redis: Redis, apiUrl: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (
      await callAsTask(apiUrl, NOOP_TOOL, {}).then(
        (id) => waitEnded(redis, [id], 5).then(() => true),
        () => false,
      )
    )
      return;
    await sleep(200);
  }
  throw new Error(`${NOOP_TOOL} never listed`);
}

/** `calls` of each tool, one at a time and alternating, after `warm` unmeasured ones of each. */
export async function toolDispatch(
  redis: Redis,
  apiUrl: string,
  calls: number,
  warm = 5,
): Promise<ToolDispatchResult> {
  await untilListed(redis, apiUrl);
  const worker: number[] = [];
  const builtin: number[] = [];
  for (let i = 0; i < warm + calls; i++) {
    const w = await noopDelay(redis, apiUrl);
    const b = await builtinDelay(redis, apiUrl);
    if (i < warm) continue;
    worker.push(w);
    builtin.push(b);
  }
  const ws = summarize(worker);
  const bs = summarize(builtin);
  return {
    calls,
    worker: ws,
    builtin: bs,
    p50Ratio: round(ws.p50 / bs.p50, 2),
    p99Ratio: round(ws.p99 / bs.p99, 2),
  };
}
