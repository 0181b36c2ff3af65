// The gateway's upstream configuration: its shape, defaults and checks, read once at start (docs/gateway.md).
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { TOOL_NAME } from '@taskline/tool-sdk';

/** A header value: literal (for non-secrets), or the name of an environment variable holding it. */
const headerValue = z.union([z.string(), z.object({ env: z.string().min(1) }).strict()]);

const stdio = z
  .object({
    type: z.literal('stdio'),
    command: z.string().min(1),
    args: z.array(z.string()).default([]),
    env: z.record(z.string(), z.string()).default({}),
    cwd: z.string().optional(),
  })
  .strict();

const http = z
  .object({
    type: z.literal('http'),
    url: z.url(),
    headers: z.record(z.string(), headerValue).default({}),
  })
  .strict();

const toolSettings = z
  .object({
    taskSupport: z.enum(['required', 'optional']).optional(),
    onRestart: z.enum(['fail', 'retry', 'resume']).optional(),
  })
  .strict();

const upstream = z
  .object({
    name: z.string().regex(/^[A-Za-z0-9_-]{1,32}$/, '1-32 of A-Z a-z 0-9 _ -'),
    transport: z.discriminatedUnion('type', [stdio, http]),
    /** Tool names Taskline lists as `<prefix><name>`; `${name}_` by default. */
    prefix: z
      .string()
      .regex(/^[A-Za-z0-9_.-]{0,64}$/, 'up to 64 of A-Z a-z 0-9 _ - .')
      .optional(),
    /** `*` (every tool it lists) or the upstream names to expose. */
    tools: z.union([z.literal('*'), z.array(z.string().min(1))]).default('*'),
    /** Every tool's settings unless `perTool` names it: `optional` and `fail` by default. */
    taskSupport: z.enum(['required', 'optional']).default('optional'),
    onRestart: z.enum(['fail', 'retry', 'resume']).default('fail'),
    perTool: z.record(z.string(), toolSettings).default({}),
    /** Calls to this upstream in flight at once, from this worker (all its tools together). */
    concurrency: z.number().int().min(1).max(1024).default(4),
    timeoutMs: z.number().int().min(1).optional(),
    /** Sends the caller's tenant upstream in `_meta["io.taskline/tenant"]`: off unless set. */
    passTenant: z.boolean().default(false),
  })
  .strict();

const upstreams = z.object({ upstreams: z.array(upstream).min(1) }).strict();

export type UpstreamConfig = z.infer<typeof upstream>;
export type StdioTransportConfig = z.infer<typeof stdio>;
export type HttpTransportConfig = z.infer<typeof http>;

/** Why the upstream configuration cannot be used; the message names the field. */
export class UpstreamConfigError extends Error {
  constructor(message: string) {
    super(`upstream configuration: ${message}`);
    this.name = 'UpstreamConfigError';
  }
}

/** The prefix an upstream's tools are listed under. */
export const prefixOf = (u: UpstreamConfig) => u.prefix ?? `${u.name}_`;

/**
 * Parses and checks the configuration (JSON text): shapes, unique names, a prefix that keeps the
 * listed names valid (MCP 2025-11-25 tool names), header variables that are set.
 */
export function parseUpstreams(json: string, env: NodeJS.ProcessEnv): UpstreamConfig[] {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch (err) {
    throw new UpstreamConfigError(`not JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  const parsed = upstreams.safeParse(raw);
  if (!parsed.success) {
    const first = parsed.error.issues[0]!;
    throw new UpstreamConfigError(`${first.path.join('.') || '(root)'}: ${first.message}`);
  }
  const names = new Set<string>();
  for (const u of parsed.data.upstreams) {
    if (names.has(u.name)) throw new UpstreamConfigError(`upstream ${u.name} is defined twice`);
    names.add(u.name);
    if (u.transport.type !== 'http') continue;
    for (const [header, value] of Object.entries(u.transport.headers))
      if (typeof value !== 'string' && env[value.env] === undefined)
        throw new UpstreamConfigError(
          `upstream ${u.name}: header ${header} names ${value.env}, which is not set`,
        );
  }
  return parsed.data.upstreams;
}

/** The configuration from `--upstreams <file>` or else TASKLINE_UPSTREAMS; none when neither is given. */
export function readUpstreams(file: string | undefined, env: NodeJS.ProcessEnv): UpstreamConfig[] {
  if (file !== undefined) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new UpstreamConfigError(
        `${file} cannot be read: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    return parseUpstreams(text, env);
  }
  return env.TASKLINE_UPSTREAMS ? parseUpstreams(env.TASKLINE_UPSTREAMS, env) : [];
}

/** The name Taskline lists an upstream tool under, or null when the result breaks the tool-name rules. */
export function listedName(u: UpstreamConfig, tool: string): string | null {
  const name = `${prefixOf(u)}${tool}`;
  return TOOL_NAME.test(name) ? name : null;
}
