/* eslint-disable @typescript-eslint/no-explicit-any -- tool results and raw JSON-RPC replies are checked field by field */
/**
 * An independent client against the api process: `@modelcontextprotocol/ext-tasks`' requester on
 * the SDK `Client` (2026-07-28 pinned), driving the built-in tools end to end on real scheduler and
 * gpu-worker processes — poll to completion, answer input, cancel — with API keys and JWTs.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { exportSPKI, generateKeyPair, SignJWT } from 'jose';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import {
  createTaskSessionFromClient,
  resultFromTaskOutcome,
  type ApplicationInputRequest,
  type JsonRpcResponse,
  type RawClientDispatch,
  type TaskEnabledSession,
  type TaskView,
} from '@modelcontextprotocol/ext-tasks/client';
import { startMcpStack, type Replica } from '@taskline/test-support/mcp-stack';
import { pollTask, rpc, TASKS } from '@taskline/test-support/mcp';

const VERSION = '2026-07-28';
const KEY = 'key-a-secret';
const PROGRESS = /^\d+\/\d+ prompts done$/;
const CLIENT_INFO = { name: 'requester-test', version: '1.0.0' };

/**
 * The host side the requester leaves to us: one POST per request, the reply read from JSON or
 * from the SSE stream. Headers are set, not appended: ext-tasks puts its own Mcp-Name on task
 * requests, and a second value would reach the server as "id, id" (-32020).
 */
function rawDispatch(url: string, token: string): RawClientDispatch {
  let nextId = 1;
  return async (request, options) => {
    const id = `req-${nextId++}`;
    const { method, params } = request as { method: string; params?: Record<string, unknown> };
    const headers = new Headers({
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': VERSION,
      authorization: `Bearer ${token}`,
    });
    headers.set('mcp-method', method);
    if (method === 'tools/call' && typeof params?.name === 'string') headers.set('mcp-name', params.name);
    for (const [name, value] of Object.entries(options?.context?.headers ?? {})) headers.set(name, value);
    const res = await fetch(url, {
      method: 'POST',
      headers,
      body: JSON.stringify({ ...(request as object), jsonrpc: '2.0', id }),
      signal: options?.signal,
    });
    const text = await res.text();
    const messages: any[] = res.headers.get('content-type')?.includes('text/event-stream')
      ? text
          .split('\n')
          .filter((l) => l.startsWith('data:'))
          .map((l) => JSON.parse(l.slice(5)))
      : [JSON.parse(text)];
    const reply = messages.find((m) => m.id === id);
    if (!reply) throw new Error(`${method}: HTTP ${res.status} without a reply: ${text.slice(0, 200)}`);
    return (
      reply.error ? { kind: 'error', error: reply.error } : { kind: 'result', result: reply.result }
    ) as JsonRpcResponse;
  };
}

/** A requester session over a connected SDK Client, authenticated with `token`. */
async function requester(
  url: string,
  token: string,
  onInput?: (request: ApplicationInputRequest) => Promise<unknown>,
): Promise<TaskEnabledSession> {
  const client = new Client(CLIENT_INFO, { versionNegotiation: { mode: { pin: VERSION } } });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  return createTaskSessionFromClient(client, {
    endpointId: url,
    rawDispatch: rawDispatch(url, token),
    v2RequestFraming: {
      protocolVersion: VERSION,
      clientInfo: CLIENT_INFO,
      clientCapabilities: { elicitation: { form: {} }, extensions: { [TASKS]: {} } },
    },
    ...(onInput && { onInputRequest: onInput as never }),
  });
}

describe('the ext-tasks requester against the api process', () => {
  let stack: Awaited<ReturnType<typeof startMcpStack>>;
  let api: Replica;
  let sign: (tenant: string) => Promise<string>;
  /** What the session's input handler saw, in order. */
  const asked: ApplicationInputRequest[] = [];
  let session: TaskEnabledSession;

  before(async () => {
    const { publicKey, privateKey } = await generateKeyPair('RS256', { extractable: true });
    sign = (tenant) =>
      new SignJWT({ tenant })
        .setProtectedHeader({ alg: 'RS256' })
        .setIssuer('https://idp.test')
        .setAudience('taskline')
        .setIssuedAt()
        .setExpirationTime('10m')
        .sign(privateKey);
    stack = await startMcpStack({
      env: {
        TASKLINE_API_KEYS: `tenant-a:${KEY}`,
        TASKLINE_JWT_PUBLIC_KEY: (await exportSPKI(publicKey)).replace(/\n/g, '\\n'),
        TASKLINE_JWT_ISSUER: 'https://idp.test',
        TASKLINE_JWT_AUDIENCE: 'taskline',
      },
      // Batches above 10 estimated tokens ask first; decode steps slow enough to cancel midway.
      workerEnv: { TASKLINE_BATCH_CONFIRM_ABOVE_TOKENS: '10', TASKLINE_WORKER_MIN_STEP_MS: '40' },
    });
    api = stack.replicas[0]!;
    session = await requester(api.url, KEY, async (request) => {
      asked.push(request);
      return { action: 'accept', content: { proceed: true } };
    });
  });
  after(async () => {
    await session?.close();
    await stack?.stop();
  });

  it('polls a tool task to completion and returns its result', async () => {
    const execution = await session.callTool('generate', {
      model: 'tiny-chat',
      input: 'Hello there',
      max_output_tokens: 8,
    });
    assert.equal(execution.kind, 'task');
    const views: TaskView[] = [];
    const { outcome } = await execution.settle({
      onEvent: (e) => void (e.type === 'task' && views.push(e.task)),
    });
    assert.equal(outcome.status, 'completed', JSON.stringify(outcome));
    const result = resultFromTaskOutcome(outcome) as any;
    assert.equal(result.content[0].type, 'text');
    assert.ok(
      result.structuredContent.usage.output_tokens > 0,
      'result.structuredContent.usage.output_tokens > 0',
    );
    assert.ok(views.length > 0, 'the requester saw the task while it ran');
    assert.ok(
      views.every((v) => v.taskId === execution.handle?.taskId),
      'views.every((v) => v.taskId === execution.handle?.taskId)',
    );
  });

  it('answers the input a task asks for, once, and sees progress on the way to completion', async () => {
    asked.length = 0;
    const prompts = ['Tell me a story.', 'Name a colour.'];
    const execution = await session.callTool('batch_generate', {
      model: 'tiny-chat',
      prompts,
      max_output_tokens: 12,
    });
    const messages = new Set<string>();
    const statuses = new Set<string>();
    const { outcome } = await execution.settle({
      onEvent: (e) => {
        if (e.type !== 'task') return;
        statuses.add(e.task.status);
        if (e.task.statusMessage) messages.add(e.task.statusMessage);
      },
    });
    assert.equal(outcome.status, 'completed', JSON.stringify(outcome));
    assert.equal(asked.length, 1);
    assert.equal(asked[0]!.kind, 'elicitation');
    assert.match(String(asked[0]!.params?.message), /estimated at 32 tokens/);
    assert.ok(statuses.has('input_required'), "statuses.has('input_required')");
    assert.ok(
      [...messages].some((m) => PROGRESS.test(m)),
      [...messages].join(' | '),
    );
    const result = resultFromTaskOutcome(outcome) as any;
    assert.deepEqual(
      result.structuredContent.results.map((r: any) => r.prompt),
      prompts,
    );
  });

  it('cancels a running task: the outcome is cancelled and the server agrees', async () => {
    const execution = await session.callTool('batch_generate', {
      model: 'tiny-chat',
      prompts: ['one', 'two', 'three'],
      max_output_tokens: 200,
    });
    const taskId = execution.handle!.taskId;
    let cancelling: Promise<void> | null = null;
    const { outcome } = await execution.settle({
      onEvent: (e) => {
        // Cancel once the tool reports progress: it is past the confirmation, generating.
        if (!cancelling && e.type === 'task' && PROGRESS.test(e.task.statusMessage ?? ''))
          cancelling = execution.cancel();
      },
    });
    assert.ok(cancelling, 'the task was seen running before it ended');
    await cancelling;
    assert.equal(outcome.status, 'cancelled', JSON.stringify(outcome));
    // The acknowledged cancel is `cancelling` on the server (`working` on MCP) until the worker has
    // stopped: on a loaded host the first read can come before that.
    const task = await pollTask(api.url, taskId, (t) => t.status !== 'working', { token: KEY });
    assert.equal(task.status, 'cancelled');
  });

  it('binds a JWT-authenticated call to the token\u2019s tenant: another tenant\u2019s token gets -32602', async () => {
    // A JWT for tenant-a is the same tenant as its API key; tenant-b is someone else.
    const jwtA = await sign('tenant-a');
    const jwtB = await sign('tenant-b');
    const jwtSession = await requester(api.url, jwtA);
    try {
      const execution = await jwtSession.callTool('generate', {
        model: 'tiny-chat',
        input: 'Hi',
        max_output_tokens: 4,
      });
      const taskId = execution.handle!.taskId;
      const foreign = await rpc(api.url, 'tasks/get', { taskId }, { token: jwtB });
      const unknown = await rpc(api.url, 'tasks/get', { taskId: 'task_doesnotexist' }, { token: jwtB });
      assert.equal(foreign.message.error?.code, -32602, JSON.stringify(foreign.message));
      assert.deepEqual(foreign.message.error, unknown.message.error, 'a foreign task reads as unknown');
      const update = await rpc(api.url, 'tasks/update', { taskId, inputResponses: {} }, { token: jwtB });
      assert.equal(update.message.error?.code, -32602);
      const cancel = await rpc(api.url, 'tasks/cancel', { taskId }, { token: jwtB });
      assert.equal(cancel.message.error?.code, -32602);
      // The owner sees it through the JWT and through tenant-a's API key alike.
      const { outcome } = await execution.settle();
      assert.equal(outcome.status, 'completed', 'the foreign cancel changed nothing');
      const owned = await pollTask(api.url, taskId, () => true, { token: KEY });
      assert.equal(owned.status, 'completed');
      const stored = await stack.cluster.store.get(taskId);
      assert.equal(stored?.tenant, 'tenant-a');
    } finally {
      await jwtSession.close();
    }
  });
});
