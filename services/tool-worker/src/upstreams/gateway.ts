// The gateway: upstream MCP servers' tools made tool definitions a tool worker serves as durable tasks.
import {
  McpError,
  ErrorCode,
  type ElicitRequest,
  type ElicitResult,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { Logger } from '@taskline/log';
import {
  ToolFailure,
  type ToolContext,
  type ToolDefinition,
  type ToolJsonSchemas,
  type ToolResult,
} from '@taskline/tool-sdk';
import { listedName, type UpstreamConfig } from './config.js';
import { relayedAnswer, Upstream } from './upstream.js';
import { runUpstreamTask } from './upstream-task.js';

/** What the gateway hands the tool worker: the definitions, their upstream JSON schemas as listed, and a close. */
export interface Gateway {
  tools: ToolDefinition[];
  /** The upstream's own `inputSchema` per listed name: passed through to `tools/list` unchanged. */
  schemas: Map<string, ToolJsonSchemas>;
  upstreams: Upstream[];
  /** Which upstream serves each listed name. */
  owners: Map<string, Upstream>;
  close(): Promise<void>;
}

export interface GatewayOptions {
  /** Where header values named `{ env }` are read. */
  env: NodeJS.ProcessEnv;
  log: Logger;
  /** TASKLINE_UPSTREAM_TIMEOUT_MS: an upstream's `timeoutMs` wins. */
  timeoutMs: number;
  maxResultBytes: number;
  /** Told each upstream's state as it changes (the `taskline_upstream_up` gauge). */
  onUpstreamState?: (upstream: string, up: boolean) => void;
}

/** Why an upstream call failed, in words a caller can act on (never the upstream's credentials). */
export function upstreamFailure(upstream: string, timeoutMs: number, err: unknown): ToolFailure {
  if (err instanceof McpError) {
    if (err.code === Number(ErrorCode.RequestTimeout))
      return new ToolFailure(`upstream ${upstream} did not answer within ${timeoutMs} ms`);
    if (err.code === Number(ErrorCode.ConnectionClosed))
      return new ToolFailure(`upstream ${upstream} closed the connection before answering`);
    return new ToolFailure(`upstream ${upstream} answered JSON-RPC error ${err.code}: ${err.message}`);
  }
  const issues = (err as { issues?: { path: PropertyKey[]; message: string }[] } | null)?.issues;
  // The SDK's own zod copy checks the result: its ZodError is not this package's class.
  if (Array.isArray(issues) && issues[0]) {
    const where = issues[0].path.map(String).join('.') || '(result)';
    return new ToolFailure(
      `upstream ${upstream} answered something that is not a tools/call result: ${where}: ${issues[0].message}`,
    );
  }
  const why = err instanceof Error ? err.message : String(err);
  return new ToolFailure(`upstream ${upstream} is unavailable: ${why}`);
}

/** Fails a result larger than the bound: a task keeps its result in Redis. */
function boundedResult(upstream: string, result: unknown, maxBytes: number): ToolResult {
  const bytes = Buffer.byteLength(JSON.stringify(result));
  if (bytes > maxBytes)
    throw new ToolFailure(
      `upstream ${upstream} answered ${bytes} bytes, above the limit of ${maxBytes} (TASKLINE_UPSTREAM_MAX_RESULT_BYTES)`,
    );
  return result as ToolResult;
}

/**
 * Relays upstream progress as the task's progress, in order; a refused write (a stale attempt) is
 * dropped. `written` settles once every relayed notification is written: the result waits for it,
 * so the last progress is never written after the end (where it would be refused).
 */
function progressRelay(ctx: ToolContext) {
  let chain = Promise.resolve();
  return {
    relay(p: { progress: number; total?: number; message?: string }) {
      const message = p.message ?? (p.total !== undefined ? `${p.progress}/${p.total}` : String(p.progress));
      const counts = { progress: p.progress, ...(p.total !== undefined && { total: p.total }) };
      chain = chain.then(() => ctx.progress(message, counts)).catch(() => undefined);
    },
    written: () => chain,
  };
}

/** Whether a call of `tool` runs as an upstream task: the upstream runs tasks and the tool takes them. */
const asTask = (tool: Tool, upstreamRunsTasks: boolean) =>
  upstreamRunsTasks &&
  (tool.execution?.taskSupport === 'required' || tool.execution?.taskSupport === 'optional');

/**
 * Relays the upstream's n-th question of this task as the task's input request `upstream-<n>`
 * (ctx.ask). Asked the first time, the attempt parks: the upstream call is cancelled, and once the
 * caller answers, the next attempt calls the upstream again, whose same n-th question then gets
 * the recorded answer at once (docs/gateway.md, "What the upstream asks").
 */
function elicitRelay(ctx: ToolContext, upstream: string) {
  let asked = 0;
  return async (params: ElicitRequest['params']): Promise<ElicitResult> => {
    const key = `upstream-${asked++}`;
    const answers = await ctx.ask({ [key]: { method: 'elicitation/create', params } });
    return relayedAnswer(answers, key, upstream);
  };
}

function definitionOf(
  upstream: Upstream,
  tool: Tool,
  listed: string,
  options: GatewayOptions & { upstreamRunsTasks: boolean },
): ToolDefinition {
  const u = upstream.config;
  const taskCall = asTask(tool, options.upstreamRunsTasks);
  const settings = u.perTool[tool.name] ?? {};
  return {
    name: listed,
    ...(tool.title !== undefined && { title: tool.title }),
    description: tool.description || `${tool.name} on ${u.name}`,
    // The api validates against the same conversion of the listed schema (live.ts).
    inputSchema: z.fromJSONSchema(tool.inputSchema as never) as z.ZodObject,
    taskSupport: settings.taskSupport ?? u.taskSupport,
    onRestart: settings.onRestart ?? u.onRestart,
    concurrency: u.concurrency,
    async run(args, ctx) {
      const meta = u.passTenant ? { 'io.taskline/tenant': ctx.tenant } : undefined;
      const progress = progressRelay(ctx);
      try {
        const input = args as Record<string, unknown>;
        const result = taskCall
          ? await runUpstreamTask(upstream, tool.name, input, ctx, meta)
          : await upstream.call(tool.name, input, {
              signal: ctx.signal,
              onProgress: (p) => progress.relay(p),
              onElicit: elicitRelay(ctx, u.name),
              ...(meta && { meta }),
            });
        await progress.written();
        return boundedResult(u.name, result, options.maxResultBytes);
      } catch (err) {
        if (ctx.signal.aborted || err instanceof ToolFailure) throw err;
        throw upstreamFailure(u.name, upstream.timeoutMs(), err);
      }
    },
  };
}

/** The tools of one upstream it is configured to expose; a tool whose name or schema cannot be served is skipped, logged. */
async function exposed(upstream: Upstream, options: GatewayOptions) {
  const u = upstream.config;
  const out: { definition: ToolDefinition; schema: Record<string, unknown> }[] = [];
  const tools = await upstream.tools();
  const upstreamRunsTasks = await upstream.runsTasks();
  for (const tool of tools) {
    if (u.tools !== '*' && !u.tools.includes(tool.name)) continue;
    const listed = listedName(u, tool.name);
    try {
      if (!listed)
        throw new Error('its prefixed name breaks the tool-name rules (1-128 of A-Z a-z 0-9 _ - .)');
      out.push({
        definition: definitionOf(upstream, tool, listed, { ...options, upstreamRunsTasks }),
        schema: tool.inputSchema,
      });
    } catch (err) {
      options.log.warn('upstream_tool_skipped', { upstream: u.name, tool: tool.name, error: err });
    }
  }
  return out;
}

/**
 * Connects every upstream and lists its tools. An upstream that is down is logged
 * (`upstream_down`) and serves nothing until the worker restarts; the others are served.
 */
export async function startGateway(configs: UpstreamConfig[], options: GatewayOptions): Promise<Gateway> {
  const upstreams = configs.map((c) => {
    const upstream = new Upstream(c, { env: options.env, timeoutMs: options.timeoutMs }, options.log);
    upstream.onState = (up) => options.onUpstreamState?.(c.name, up);
    return upstream;
  });
  const tools: ToolDefinition[] = [];
  const schemas = new Map<string, ToolJsonSchemas>();
  const owners = new Map<string, Upstream>();
  for (const upstream of upstreams) {
    try {
      for (const { definition, schema } of await exposed(upstream, options)) {
        tools.push(definition);
        schemas.set(definition.name, { inputSchema: schema });
        owners.set(definition.name, upstream);
      }
    } catch (err) {
      options.log.error('upstream_down', { upstream: upstream.config.name, error: err });
    }
  }
  return {
    tools,
    schemas,
    upstreams,
    owners,
    close: () => Promise.all(upstreams.map((u) => u.close())).then(() => undefined),
  };
}
