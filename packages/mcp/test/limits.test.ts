/* eslint-disable @typescript-eslint/no-explicit-any -- raw JSON-RPC replies are checked field by field */
/**
 * The tenant limits LMSP enforces hold on `/mcp` too, against the real api process: the request
 * rate (TASKLINE_RATE_LIMIT_*) on every call, the unfinished-task cap (TASKLINE_MAX_UNFINISHED_TASKS)
 * on tool calls that become tasks; over either, HTTP 429 with Retry-After and JSON-RPC -32005.
 */
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import assert from 'node:assert/strict';
import { isTerminal } from '@taskline/engine';
import { scanKeys } from '@taskline/testing';
import { startMcpStack, until } from '@taskline/test-support/mcp-stack';
import { post2025, rawPost2025, rpc, type RpcReply } from '@taskline/test-support/mcp';

const BURST = 12;
const CAP = 2;
const MAX_STREAMS = 2;

describe('MCP under the per-tenant limits of the api', () => {
  let stack: Awaited<ReturnType<typeof startMcpStack>>;
  let url: string;

  before(async () => {
    stack = await startMcpStack({
      env: {
        TASKLINE_API_KEYS:
          'tenant-rate:key-rate-secret,tenant-cap:key-cap-secret,tenant-2025:key-2025-secret,tenant-sse:key-sse-secret,tenant-gone:key-gone-secret',
        TASKLINE_RATE_LIMIT_PER_S: '1',
        TASKLINE_RATE_LIMIT_BURST: String(BURST),
        TASKLINE_MAX_UNFINISHED_TASKS: String(CAP),
        // Every batch asks to be confirmed first, so its task stays unfinished until answered.
        TASKLINE_BATCH_CONFIRM_ABOVE_TOKENS: '1',
        TASKLINE_MAX_STREAMS: String(MAX_STREAMS),
        TASKLINE_SSE_HEARTBEAT_MS: '200',
      },
    });
    url = stack.replicas[0]!.url;
  });
  after(() => stack.stop());

  const assertLimited = (reply: RpcReply) => {
    assert.equal(reply.status, 429, JSON.stringify(reply.message));
    assert.equal(reply.message.error?.code, -32005, JSON.stringify(reply.message));
    assert.equal(reply.message.error.data.code, 'rate_limited');
    const retryAfter = Number(reply.headers.get('retry-after'));
    assert.ok(retryAfter >= 1, `Retry-After: ${reply.headers.get('retry-after')}`);
    assert.equal(reply.message.error.data.retryAfter, retryAfter);
    assert.equal(reply.message.result, undefined);
  };

  it('requests past the burst are refused with 429, Retry-After and -32005', async () => {
    // Sent together, so the bucket's refill (1/s) cannot keep pace however slow the host is.
    const replies = await Promise.all(
      Array.from({ length: BURST + 3 }, () => rpc(url, 'tools/list', {}, { token: 'key-rate-secret' })),
    );
    const limited = replies.filter((r) => r.status === 429);
    assert.ok(limited.length >= 2, `statuses: ${replies.map((r) => r.status).join(',')}`);
    for (const reply of limited) assertLimited(reply);
  });

  it('a tool call that would be one task too many is refused before any task is made', async () => {
    const batch = () =>
      rpc(
        url,
        'tools/call',
        { name: 'batch_generate', arguments: { model: 'tiny-chat', prompts: ['Hello'] } },
        { token: 'key-cap-secret' },
      );
    const ids: string[] = [];
    for (let i = 0; i < CAP; i++) {
      const created = await batch();
      assert.equal(created.message.result?.resultType, 'task', JSON.stringify(created.message));
      ids.push(created.message.result.taskId);
    }
    // SCAN answers in the order of Redis's hash table, which a rehash changes: compare as sets.
    const taskKeys = async () => (await scanKeys(stack.cluster.store.redis, 'tl:{task_*}:task')).sort();
    const before = await taskKeys();
    assertLimited(await batch());
    assert.deepEqual(await taskKeys(), before);

    // A finished task frees its place.
    const cancelled = await rpc(url, 'tasks/cancel', { taskId: ids[0] }, { token: 'key-cap-secret' });
    assert.equal(cancelled.message.error, undefined, JSON.stringify(cancelled.message));
    await until(`task ${ids[0]} ends`, async () => {
      const task = await stack.cluster.store.get(ids[0]!);
      return task && isTerminal(task.status) ? true : undefined;
    });
    const again = await batch();
    assert.equal(again.message.result?.resultType, 'task', JSON.stringify(again.message));
  });

  /** A raw POST of tenant `token`, in `session` when given (MCP 2025-11-25). */
  const initialize = {
    protocolVersion: '2025-11-25',
    // Able to answer, so a batch's confirmation is asked and its task stays unfinished.
    capabilities: { elicitation: {} },
    clientInfo: { name: 't', version: '1' },
  };

  /** A 2025-11-25 session of `token` and a batch task in it waiting for its confirmation: its tasks/result stays open. */
  const waitingBatch = async (token: string) => {
    const init = await post2025(url, token, { method: 'initialize', params: initialize });
    const session = init.headers.get('mcp-session-id')!;
    const created = (await (
      await post2025(
        url,
        token,
        {
          method: 'tools/call',
          params: { name: 'batch_generate', arguments: { model: 'tiny-chat', prompts: ['Hi'] }, task: {} },
        },
        session,
      )
    ).json()) as any;
    return { session, taskId: created.result.task.taskId as string };
  };

  it('a 2025-11-25 tasks/result stream is an open stream like a listen: capped and kept alive', async () => {
    const token = 'key-sse-secret';
    const { session, taskId } = await waitingBatch(token);
    const controller = new AbortController();
    const result = () =>
      post2025(url, token, { method: 'tasks/result', params: { taskId } }, session, controller.signal);
    try {
      const open = [];
      for (let i = 0; i < MAX_STREAMS; i++) open.push(await result());
      for (const res of open) assert.equal(res.headers.get('content-type'), 'text/event-stream');
      const over = await result();
      // The status first: a stream let through would never end.
      assert.equal(over.status, 429, over.headers.get('content-type') ?? '');
      assert.equal(((await over.json()) as any).error.code, -32005);
      assert.ok(Number(over.headers.get('retry-after')) >= 1, "Number(over.headers.get('retry-after')) >= 1");
      // Heartbeat comments keep the waiting stream alive through proxies.
      const reader = open[0]!.body!.getReader();
      let seen = '';
      const deadline = Date.now() + 10_000;
      while (!seen.includes(': keep-alive') && Date.now() < deadline)
        seen += new TextDecoder().decode((await reader.read()).value);
      assert.match(seen, /: keep-alive/);
    } finally {
      controller.abort();
    }
  });

  it('streams whose clients left before they opened give their slots back', async () => {
    const token = 'key-gone-secret';
    const { session, taskId } = await waitingBatch(token);
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/result', params: { taskId } });
    const { hostname, port } = new URL(url);
    // More than the cap, each sent whole and dropped at once: the server opens each stream's slot
    // while its client is already gone.
    for (let i = 0; i <= MAX_STREAMS; i++) {
      const socket = connect(Number(port), hostname);
      await new Promise<void>((resolve) => socket.once('connect', resolve));
      socket.end(rawPost2025(url, token, session, body));
      socket.destroy();
    }
    // The cap's streams open together again once the server has read the dropped requests and
    // freed their slots (released, or lapsed unrenewed: a lease is three 200 ms heartbeats). Tried
    // until then, not after a fixed while: a starved api may read the dropped requests late. A
    // stream left renewing its slot would count for good, and this would time out.
    const statuses: string[] = [];
    const opened = until(`${MAX_STREAMS} streams open at once`, async () => {
      const controller = new AbortController();
      statuses.length = 0;
      try {
        for (let i = 0; i < MAX_STREAMS; i++) {
          const res = await post2025(
            url,
            token,
            { method: 'tasks/result', params: { taskId } },
            session,
            controller.signal,
          );
          statuses.push(`${res.status} ${res.headers.get('content-type')}`);
          if (res.headers.get('content-type') !== 'text/event-stream') break;
        }
      } finally {
        controller.abort();
      }
      if (statuses.length === MAX_STREAMS && statuses.every((s) => s.endsWith('text/event-stream')))
        return true;
      await sleep(2000); // the tenant's request rate is 1/s: a try takes up to two
      return undefined;
    });
    await opened.catch((err: Error) => assert.fail(`${err.message}; the last try: ${statuses.join(', ')}`));
  });

  it('a 2025-11-25 session takes from the same cap through the same admission', async () => {
    const token = 'key-2025-secret';
    const post = async (body: object, session?: string) => {
      const res = await post2025(url, token, body, session);
      return {
        status: res.status,
        headers: res.headers,
        session: res.headers.get('mcp-session-id'),
        message: (await res.json()) as any,
      };
    };
    const init = await post({
      method: 'initialize',
      params: {
        protocolVersion: '2025-11-25',
        // Able to answer, so each batch's confirmation is asked and its task stays unfinished.
        capabilities: { elicitation: {} },
        clientInfo: { name: 't', version: '1' },
      },
    });
    const session = init.session!;
    const batch = () =>
      post(
        {
          method: 'tools/call',
          params: { name: 'batch_generate', arguments: { model: 'tiny-chat', prompts: ['Hello'] }, task: {} },
        },
        session,
      );
    for (let i = 0; i < CAP; i++) {
      const created = await batch();
      assert.equal(typeof created.message.result?.task?.taskId, 'string', JSON.stringify(created.message));
    }
    assertLimited(await batch());
    // The 2026 surface sees the same count for the tenant.
    assertLimited(
      await rpc(
        url,
        'tools/call',
        { name: 'batch_generate', arguments: { model: 'tiny-chat', prompts: ['Hello'] } },
        { token },
      ),
    );
  });
});
