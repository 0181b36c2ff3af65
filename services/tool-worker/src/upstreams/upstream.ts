// One upstream MCP server as the gateway holds it: its connection (restarted when lost), its tools and its calls.
import { randomUUID } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  ElicitRequestSchema,
  ErrorCode,
  LATEST_PROTOCOL_VERSION,
  McpError,
  RELATED_TASK_META_KEY,
  type ElicitRequest,
  type ElicitResult,
  LoggingMessageNotificationSchema,
  ProgressNotificationSchema,
  ToolListChangedNotificationSchema,
  type CallToolResult,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from '@taskline/log';
import type { UpstreamConfig } from './config.js';

const CLIENT_INFO = { name: 'taskline-gateway', version: '0.1.0' };

/** What a call reports while it runs: upstream progress notifications and questions. */
export interface CallHooks {
  signal: AbortSignal;
  onProgress(progress: { progress: number; total?: number; message?: string }): void;
  /** An upstream `elicitation/create` while this call runs: its answer is the reply upstream. */
  onElicit(params: ElicitRequest['params']): Promise<ElicitResult>;
  meta?: Record<string, unknown>;
}

/**
 * The caller's answer to input request `key`, the reply to the upstream's `elicitation/create`; a
 * caller that cannot answer (its key comes back undefined) is a JSON-RPC error upstream.
 */
export function relayedAnswer(answers: Record<string, unknown>, key: string, upstream: string): ElicitResult {
  const answer = answers[key];
  if (answer === undefined)
    throw new McpError(
      ErrorCode.InvalidRequest,
      `taskline: the caller of this task cannot answer elicitation (${upstream} asked)`,
    );
  return answer as ElicitResult;
}

/** A plain semaphore: at most `limit` holders at once, the rest wait in order. */
class Slots {
  private used = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(private readonly limit: number) {}

  async take(signal: AbortSignal): Promise<() => void> {
    if (this.used >= this.limit) {
      await new Promise<void>((resolve, reject) => {
        const go = () => {
          signal.removeEventListener('abort', stop);
          resolve();
        };
        const stop = () => {
          this.waiting.splice(this.waiting.indexOf(go), 1);
          reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
        };
        signal.addEventListener('abort', stop, { once: true });
        this.waiting.push(go);
      });
    } else this.used++;
    // The slot passes straight to the next waiter, or is freed.
    return () => {
      const next = this.waiting.shift();
      if (next) next();
      else this.used--;
    };
  }
}

/** Resolves header values: literals as given, `{ env }` from the worker's environment (never logged). */
function headersOf(u: UpstreamConfig & { transport: { type: 'http' } }, env: NodeJS.ProcessEnv) {
  return Object.fromEntries(
    Object.entries(u.transport.headers).map(([k, v]) => [k, typeof v === 'string' ? v : (env[v.env] ?? '')]),
  );
}

export class Upstream {
  private client: Promise<Client> | null = null;
  private transportInUse: Transport | null = null;
  /** The connected client, so that a late close of an older one does not drop a newer one. */
  private current: Client | null = null;
  private readonly slots: Slots;
  /** The calls in flight on this connection: an upstream question is relayed when it is the only one. */
  private readonly inFlight = new Set<CallHooks>();
  /** The progress hooks of the calls in flight, by the progress token each call was sent with. */
  private readonly progressHooks = new Map<string, CallHooks['onProgress']>();
  /** Who answers the questions of each upstream task followed here (by upstream task id). */
  private readonly taskQuestions = new Map<string, CallHooks['onElicit']>();
  /** Names the open stdio connection (its child): an upstream task lives and dies with it. */
  private child: string | undefined;
  /** Called with the upstream's tools when it says they changed. */
  onToolsChanged: (tools: Tool[]) => void = () => undefined;
  /** Called when a connection opens (true), fails to open or closes (false). */
  onState: (up: boolean) => void = () => undefined;

  constructor(
    readonly config: UpstreamConfig,
    private readonly settings: { env: NodeJS.ProcessEnv; timeoutMs: number },
    private readonly log: Logger,
  ) {
    this.slots = new Slots(config.concurrency);
  }

  private transport(): Transport {
    const t = this.config.transport;
    if (t.type === 'http')
      return new StreamableHTTPClientTransport(new URL(t.url), {
        requestInit: { headers: headersOf({ ...this.config, transport: t }, this.settings.env) },
      });
    // The child gets a minimal environment plus its own settings, never the worker's secrets.
    const child = new StdioClientTransport({
      command: t.command,
      args: t.args,
      env: { ...getDefaultEnvironment(), ...t.env },
      ...(t.cwd !== undefined && { cwd: t.cwd }),
      stderr: 'pipe',
    });
    child.stderr?.on('data', (chunk: Buffer) =>
      this.log.info('upstream_stderr', { upstream: this.config.name, line: chunk.toString().slice(0, 2000) }),
    );
    return child;
  }

  /** Opens a connection, or answers the open one; a lost connection is opened again on the next use. */
  connect(): Promise<Client> {
    this.client ??= this.open();
    return this.client;
  }

  private async open(): Promise<Client> {
    // Form elicitation only: sampling and roots are not declared, and an upstream that asks anyway
    // gets JSON-RPC -32601 (method not found) at once instead of waiting (docs/gateway.md).
    const client = new Client(CLIENT_INFO, { capabilities: { elicitation: { form: {} } } });
    client.setRequestHandler(ElicitRequestSchema, (request) => this.elicit(request.params));
    client.onclose = () => {
      if (this.current !== client) return;
      this.current = null;
      this.client = null;
      this.onState(false);
      this.log.warn('upstream_closed', { upstream: this.config.name });
    };
    // Progress routed here, not by the SDK's `onprogress`: the SDK runs a notification's handler a
    // microtask after reading it, but drops a call's progress handler as soon as it reads the
    // response, so a last progress read in one chunk with the response was lost. These hooks
    // outlive the response by a turn of the event loop.
    client.setNotificationHandler(ProgressNotificationSchema, (n) => {
      const { progressToken, ...progress } = n.params;
      this.progressHooks.get(String(progressToken))?.(progress);
    });
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void this.refreshTools());
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) =>
      this.log.info('upstream_log', { upstream: this.config.name, level: n.params.level }),
    );
    const transport = this.transport();
    try {
      await client.connect(transport, { timeout: this.timeoutMs() });
    } catch (err) {
      this.client = null;
      this.onState(false);
      await client.close().catch(() => undefined);
      throw err;
    }
    this.onState(true);
    this.current = client;
    this.transportInUse = transport;
    this.child = transport instanceof StdioClientTransport ? randomUUID() : undefined;
    this.log.info('upstream_connected', { upstream: this.config.name });
    return client;
  }

  private async refreshTools(): Promise<void> {
    try {
      this.onToolsChanged(await this.tools());
    } catch (err) {
      this.log.warn('upstream_list_failed', { upstream: this.config.name, error: err });
    }
  }

  timeoutMs(): number {
    return this.config.timeoutMs ?? this.settings.timeoutMs;
  }

  /** Every tool the upstream lists (all pages). */
  async tools(): Promise<Tool[]> {
    const client = await this.connect();
    const tools: Tool[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor ? { cursor } : {}, { timeout: this.timeoutMs() });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor);
    return tools;
  }

  /**
   * Relays an upstream question to the call that asked it. Over one connection a request names no
   * call it belongs to, so it is relayed only while a single call is in flight; otherwise it is
   * refused with a JSON-RPC error saying so (set the upstream's `concurrency` to 1 to relay).
   */
  private elicit(params: ElicitRequest['params']): Promise<ElicitResult> {
    // An upstream task's question names its task (MCP 2025-11-25, Tasks: related-task metadata).
    const related = (params._meta?.[RELATED_TASK_META_KEY] as { taskId?: unknown } | undefined)?.taskId;
    if (typeof related === 'string') {
      const asker = this.taskQuestions.get(related);
      if (!asker)
        throw new McpError(
          ErrorCode.InvalidRequest,
          `taskline: no call follows upstream task ${related} here`,
        );
      return asker(params);
    }
    const [only, ...more] = this.inFlight;
    if (!only || more.length > 0)
      throw new McpError(
        ErrorCode.InvalidRequest,
        `taskline: ${this.inFlight.size} calls in flight, so the question cannot be relayed to the one that asked`,
      );
    return only.onElicit(params);
  }

  /** Relays the questions upstream task `taskId` asks to `asker` until the returned function is called. */
  askedBy(taskId: string, asker: CallHooks['onElicit']): () => void {
    this.taskQuestions.set(taskId, asker);
    return () => {
      if (this.taskQuestions.get(taskId) === asker) this.taskQuestions.delete(taskId);
    };
  }

  /** Runs `work` within the upstream's concurrency (`concurrency` calls from this worker at once). */
  async withSlot<T>(signal: AbortSignal, work: () => Promise<T>): Promise<T> {
    const release = await this.slots.take(signal);
    try {
      return await work();
    } finally {
      release();
    }
  }

  /**
   * Calls `name` upstream with a progress token, within the upstream's concurrency and timeout.
   * An abort sends `notifications/cancelled` upstream (the SDK does, for a request it aborts).
   */
  call(name: string, args: Record<string, unknown>, hooks: CallHooks): Promise<CallToolResult> {
    return this.withSlot(hooks.signal, async () => {
      const client = await this.connect();
      const timeout = this.timeoutMs();
      const progressToken = randomUUID();
      this.inFlight.add(hooks);
      this.progressHooks.set(progressToken, hooks.onProgress);
      try {
        return (await client.callTool(
          { name, arguments: args, _meta: { ...hooks.meta, progressToken } },
          undefined,
          { signal: hooks.signal, timeout, maxTotalTimeout: timeout },
        )) as CallToolResult;
      } finally {
        this.inFlight.delete(hooks);
        setImmediate(() => this.progressHooks.delete(progressToken));
      }
    });
  }

  /** Whether the upstream runs tool calls as tasks (MCP 2025-11-25 `tasks.requests.tools.call`). */
  async runsTasks(): Promise<boolean> {
    const capabilities = (await this.connect()).getServerCapabilities();
    return capabilities?.tasks?.requests?.tools?.call !== undefined;
  }

  /** The open stdio connection's id (a new one for every child); none over HTTP. */
  get childId(): string | undefined {
    return this.child;
  }

  /** The Streamable HTTP session of the open connection (upstream tasks may live in it); none over stdio. */
  get sessionId(): string | undefined {
    return this.transportInUse instanceof StreamableHTTPClientTransport
      ? this.transportInUse.sessionId
      : undefined;
  }

  /**
   * A client in session `session`: the open connection when it is that session (or none is
   * named), else a connection that rejoins it (Streamable HTTP, no new `initialize`), which the
   * caller closes. How an attempt after a crash reaches an upstream task that lives in a session.
   */
  async inSession(session: string | undefined): Promise<{ client: Client; done(): Promise<void> }> {
    const t = this.config.transport;
    if (session === undefined || session === this.sessionId || t.type !== 'http')
      return { client: await this.connect(), done: async () => undefined };
    const transport = new StreamableHTTPClientTransport(new URL(t.url), {
      sessionId: session,
      requestInit: { headers: headersOf({ ...this.config, transport: t }, this.settings.env) },
    });
    transport.setProtocolVersion(LATEST_PROTOCOL_VERSION);
    // The upstream task may ask on this connection too (on its tasks/result).
    const client = new Client(CLIENT_INFO, { capabilities: { elicitation: { form: {} } } });
    client.setRequestHandler(ElicitRequestSchema, (request) => this.elicit(request.params));
    await client.connect(transport, { timeout: this.timeoutMs() });
    // Closing the transport only, not the session: a DELETE would end the upstream's tasks.
    return { client, done: () => client.close() };
  }

  async close(): Promise<void> {
    const client = this.client;
    this.client = null;
    await (await client?.catch(() => null))?.close();
  }
}
