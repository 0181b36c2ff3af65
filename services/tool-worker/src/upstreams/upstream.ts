// One upstream MCP server as the gateway holds it: its connection (restarted when lost), its tools and its calls.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  LoggingMessageNotificationSchema,
  ToolListChangedNotificationSchema,
  type CallToolResult,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from '@taskline/log';
import type { UpstreamConfig } from './config.js';

const CLIENT_INFO = { name: 'taskline-gateway', version: '0.1.0' };

/** What a call reports while it runs: upstream progress notifications. */
export interface CallHooks {
  signal: AbortSignal;
  onProgress(progress: { progress: number; total?: number; message?: string }): void;
  meta?: Record<string, unknown>;
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
  /** The connected client, so that a late close of an older one does not drop a newer one. */
  private current: Client | null = null;
  private readonly slots: Slots;
  /** Called with the upstream's tools when it says they changed. */
  onToolsChanged: (tools: Tool[]) => void = () => undefined;

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
    // No client capabilities: the upstream must not send elicitation or sampling requests, and one
    // that does gets JSON-RPC -32601 (method not found) at once instead of waiting (docs/gateway.md).
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    client.onclose = () => {
      if (this.current !== client) return;
      this.current = null;
      this.client = null;
      this.log.warn('upstream_closed', { upstream: this.config.name });
    };
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void this.refreshTools());
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) =>
      this.log.info('upstream_log', { upstream: this.config.name, level: n.params.level }),
    );
    try {
      await client.connect(this.transport(), { timeout: this.timeoutMs() });
    } catch (err) {
      this.client = null;
      await client.close().catch(() => undefined);
      throw err;
    }
    this.current = client;
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
   * Calls `name` upstream with a progress token, within the upstream's concurrency and timeout.
   * An abort sends `notifications/cancelled` upstream (the SDK does, for a request it aborts).
   */
  async call(name: string, args: Record<string, unknown>, hooks: CallHooks): Promise<CallToolResult> {
    const release = await this.slots.take(hooks.signal);
    try {
      const client = await this.connect();
      const timeout = this.timeoutMs();
      return (await client.callTool(
        { name, arguments: args, ...(hooks.meta && { _meta: hooks.meta }) },
        undefined,
        { signal: hooks.signal, onprogress: hooks.onProgress, timeout, maxTotalTimeout: timeout },
      )) as CallToolResult;
    } finally {
      release();
    }
  }

  async close(): Promise<void> {
    const client = this.client;
    this.client = null;
    await (await client?.catch(() => null))?.close();
  }
}
