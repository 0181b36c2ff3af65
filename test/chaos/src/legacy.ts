/**
 * MCP 2025-11-25 sessions in the chaos run: a client of the stateful era (initialize, then
 * `Mcp-Session-Id` on every request through HAProxy, no stickiness) creates task-augmented tool
 * calls, polls them with `tasks/get`, answers their questions through the `tasks/result` stream's
 * elicitation requests (POSTed back to whichever replica), sometimes cancels them, and reads the
 * outcome with `tasks/result`. The tasks join the run's tracked set, so its invariants (every
 * acknowledged task terminal, never two different ends) cover them too.
 */
import { request as httpRequest } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { createParser } from 'eventsource-parser';
import { authz, rpcMessages, type Reply, type RpcMessage } from './client.js';

export interface LegacyHooks {
  /** The run's counted and classified HTTP call. */
  call(what: string, base: string, method: string, path: string, opts: object): Promise<Reply | null>;
  retryDelay(r: Reply | null): number;
  /** Adds a task to the run's tracked set. */
  track(taskId: string): void;
  /** Notes that a cancel was asked for a tracked task. */
  cancelRequested(taskId: string): void;
  key: string;
  /** Until when an acknowledged task may take to end. */
  terminalBoundMs: number;
}

export const legacyCounts = {
  sessions: 0,
  /** Sessions opened again after a 404: a lost session is tolerated only while Redis restarts. */
  reinitialized: 0,
  tasks: 0,
  asked: 0,
  answered: 0,
  results: 0,
  violations: [] as string[],
};

const VERSION = '2025-11-25';
const rand = (n: number) => Math.floor(Math.random() * n);

class Session {
  id: string | null = null;
  constructor(
    private readonly lb: string,
    private readonly hooks: LegacyHooks,
  ) {}

  headers(): Record<string, string> {
    return {
      ...authz(this.hooks.key),
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': VERSION,
      ...(this.id && { 'mcp-session-id': this.id }),
    };
  }

  async open(until: number): Promise<boolean> {
    while (Date.now() < until) {
      const r = await this.hooks.call('MCP 2025 initialize', this.lb, 'POST', '/mcp', {
        headers: this.headers(),
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 0,
          method: 'initialize',
          params: {
            protocolVersion: VERSION,
            capabilities: { elicitation: {}, tasks: { list: {}, cancel: {} } },
            clientInfo: { name: 'chaos', version: '1' },
          },
        }),
        timeoutMs: 20_000,
      });
      if (r?.status === 200 && r.headers['mcp-session-id']) {
        this.id = r.headers['mcp-session-id'];
        legacyCounts.sessions++;
        return true;
      }
      await sleep(this.hooks.retryDelay(r));
    }
    return false;
  }

  /** One request of the session; re-initializes once when the session is unknown. */
  async rpc(method: string, params: Record<string, unknown>): Promise<RpcMessage | undefined> {
    for (let attempt = 0; attempt < 2; attempt++) {
      const id = rand(1e9);
      const r = await this.hooks.call(`MCP 2025 ${method}`, this.lb, 'POST', '/mcp', {
        headers: this.headers(),
        body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
        timeoutMs: 20_000,
      });
      if (r?.status === 404 && (await this.open(Date.now() + 30_000))) {
        legacyCounts.reinitialized++;
        continue;
      }
      return r ? rpcMessages(r).find((m) => m.id === id) : undefined;
    }
    return undefined;
  }

  /**
   * `tasks/result` read as a stream: each elicitation request it carries is answered at once
   * (a POST of its own, to any replica), then the stream ends with the task's outcome.
   */
  async result(taskId: string, timeoutMs: number): Promise<RpcMessage | undefined> {
    const id = rand(1e9);
    const url = new URL(this.lb);
    const answers: Promise<unknown>[] = [];
    let cutOff = false;
    const final = await new Promise<RpcMessage | undefined>((resolve) => {
      let outcome: RpcMessage | undefined;
      const parser = createParser({
        onEvent: (event) => {
          const message = JSON.parse(event.data) as RpcMessage;
          if (message.id === id) outcome = message;
          else if (message.method === 'elicitation/create' && message.id !== undefined) {
            legacyCounts.asked++;
            answers.push(this.answer(message.id, taskId));
          }
        },
      });
      const req = httpRequest(
        {
          host: url.hostname,
          port: url.port,
          method: 'POST',
          path: '/mcp',
          headers: this.headers(),
          agent: false,
        },
        (res) => {
          const sse = (res.headers['content-type'] ?? '').includes('text/event-stream');
          let text = '';
          res.on('data', (d: Buffer) =>
            sse ? parser.feed(d.toString('utf8')) : (text += d.toString('utf8')),
          );
          // A finished task's outcome comes as plain JSON, not as a stream.
          res.on('end', () => resolve(sse ? outcome : parseJson(text)));
          res.on('error', () => resolve(undefined));
        },
      );
      req.on('error', () => resolve(undefined));
      // A wall-clock bound, not an idle one: the stream's keep-alive comments would reset that.
      const cut = setTimeout(() => {
        cutOff = true;
        req.destroy();
        resolve(outcome);
      }, timeoutMs);
      req.on('close', () => clearTimeout(cut));
      req.end(JSON.stringify({ jsonrpc: '2.0', id, method: 'tasks/result', params: { taskId } }));
    });
    await Promise.all(answers);
    // Still open at the bound: fine while the task runs; a stream that missed its end if the task
    // had ended seconds before.
    if (cutOff) {
      const task = (await this.rpc('tasks/get', { taskId }))?.result;
      const endedAt = Date.parse(String(task?.lastUpdatedAt));
      if (TERMINAL.includes(String(task?.status)) && endedAt < Date.now() - 5000)
        legacyCounts.violations.push(
          `${taskId}: tasks/result still open ${timeoutMs} ms in, the task ${String(task?.status)} at ${String(task?.lastUpdatedAt)}`,
        );
    }
    return final;
  }

  private async answer(requestId: unknown, taskId: string): Promise<void> {
    const r = await this.hooks.call('MCP 2025 elicitation answer', this.lb, 'POST', '/mcp', {
      headers: this.headers(),
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: requestId,
        result: { action: 'accept', content: { confirm: 'yes' } },
      }),
      timeoutMs: 20_000,
    });
    if (r?.status === 202) legacyCounts.answered++;
    else if (r && r.status < 500) legacyCounts.violations.push(`${taskId}: answer refused with ${r.status}`);
  }
}

function parseJson(text: string): RpcMessage | undefined {
  try {
    return JSON.parse(text) as RpcMessage;
  } catch {
    return undefined;
  }
}

const TERMINAL = ['completed', 'failed', 'cancelled'];

/** One 2025-11-25 client session running one tool task to its end. */
export async function legacyMcpTask(lb: string, until: number, hooks: LegacyHooks): Promise<void> {
  const session = new Session(lb, hooks);
  if (!(await session.open(until))) return;
  const tool = Math.random() < 0.5 ? 'confirm_delete' : 'slow_compute';
  const args = tool === 'slow_compute' ? { seconds: 1 + rand(2) } : { path: '/tmp/chaos-2025' };
  let taskId: string | undefined;
  for (let i = 0; i < 10 && !taskId && Date.now() < until + 5000; i++) {
    const created = await session.rpc('tools/call', { name: tool, arguments: args, task: { ttl: 600_000 } });
    taskId = (created?.result?.task as { taskId?: string } | undefined)?.taskId;
    if (!taskId) await sleep(hooks.retryDelay(null));
  }
  if (!taskId) return;
  legacyCounts.tasks++;
  hooks.track(taskId);
  const cancel = Math.random() < 0.2;
  const deadline = until + hooks.terminalBoundMs;
  while (Date.now() < deadline) {
    const got = await session.rpc('tasks/get', { taskId });
    const status = got?.result?.status as string | undefined;
    if (status && TERMINAL.includes(status)) break;
    if (cancel) {
      hooks.cancelRequested(taskId);
      await session.rpc('tasks/cancel', { taskId });
    } else if (status === 'input_required') {
      // Blocks until the task ends; its questions are answered on the way.
      const outcome = await session.result(taskId, 30_000);
      if (outcome?.result) legacyCounts.results++;
    }
    await sleep(300);
  }
  const outcome = await session.result(taskId, 30_000);
  if (outcome?.result) {
    legacyCounts.results++;
    const meta = outcome.result._meta as Record<string, { taskId?: string }> | undefined;
    if (meta?.['io.modelcontextprotocol/related-task']?.taskId !== taskId)
      legacyCounts.violations.push(`${taskId}: tasks/result without its related-task metadata`);
  }
}

/** The 2025-11-25 sessions' own promise: answers accepted, outcomes tied to their task. */
export function legacyInvariant() {
  return {
    name: '2025-11-25 sessions: answers accepted on any replica, results carry related-task metadata',
    checked: legacyCounts.tasks,
    violations: legacyCounts.violations,
  };
}
