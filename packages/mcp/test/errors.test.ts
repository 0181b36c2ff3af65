/* eslint-disable @typescript-eslint/no-explicit-any -- raw JSON-RPC replies are checked field by field */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { scanKeys } from '@taskline/testing';
import { startMcpStack } from '@taskline/test-support/mcp-stack';
import { initializeRequest, rpc, TASKS } from '@taskline/test-support/mcp';

describe('MCP error paths, raw JSON-RPC against the api service', () => {
  let stack: Awaited<ReturnType<typeof startMcpStack>>;
  let url: string;
  const token = 'key-errors-secret';

  before(async () => {
    stack = await startMcpStack({ env: { TASKLINE_API_KEYS: `tenant-e:${token}` } });
    url = stack.replicas[0]!.url;
  });
  after(() => stack.stop());

  const post = (body: string, headers: Record<string, string> = {}) =>
    fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${token}`,
        ...headers,
      },
      body,
    });

  it('a body that is not JSON: -32700, HTTP 400', async () => {
    const res = await post('{not json');
    assert.equal(res.status, 400);
    assert.equal(((await res.json()) as any).error.code, -32700);
  });

  it('JSON that is no JSON-RPC message (a number, a string, null, [1]): -32600, not a parse error', async () => {
    for (const body of ['5', '"tools/list"', 'null', 'true', '[1]']) {
      const res = await post(body);
      const text = await res.text();
      assert.equal(res.status, 400, `${body}: ${text}`);
      assert.equal(JSON.parse(text).error?.code, -32600, `${body}: ${text}`);
    }
  });

  it('a body in a charset or an encoding the server cannot read: -32700, HTTP 400, never a 500', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
    const cases: Record<string, string>[] = [
      { 'content-type': 'application/json; charset=latin1' },
      { 'content-encoding': 'compress' },
      { 'content-encoding': 'gzip' },
    ];
    for (const headers of cases) {
      const res = await post(body, headers);
      assert.equal(res.status, 400, JSON.stringify(headers));
      assert.equal(((await res.json()) as any).error.code, -32700, JSON.stringify(headers));
    }
  });

  it('a tool name that is not a string: -32602 on either era, never a 500', async () => {
    const names: unknown[] = [{ toString: 1 }, { toString: 'x', valueOf: 'y' }, 5, null];
    for (const name of names) {
      const res = await rpc(url, 'tools/call', { name, arguments: {} }, { token, name: 'generate' });
      assert.equal(res.message.error?.code, -32602, `2026-07-28, ${JSON.stringify(name)}`);
    }
    const session = await legacySession();
    for (const name of names) {
      const res = await post(
        JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name } }),
        {
          'mcp-session-id': session,
          'mcp-protocol-version': '2025-11-25',
        },
      );
      assert.equal(((await res.json()) as any).error?.code, -32602, `2025-11-25, ${JSON.stringify(name)}`);
    }
  });

  /** Every 2025-11-25 method this server answers ahead of the SDK, and one the SDK answers (tools/list). */
  const legacyCalls = (() => {
    const taskId = 'task_00000000000000000000000000';
    return [
      { method: 'tools/list', params: {} },
      { method: 'tasks/list', params: {} },
      { method: 'tasks/get', params: { taskId } },
      { method: 'tasks/result', params: { taskId } },
      { method: 'tasks/cancel', params: { taskId } },
      {
        method: 'tools/call',
        params: { name: 'generate', arguments: { model: 'tiny-chat', input: 'x' }, task: {} },
      },
    ];
  })();

  /** A 2025-11-25 session, as an SDK v1 client opens one. */
  const legacySession = async () => {
    const res = await post(JSON.stringify(initializeRequest('2025-11-25')));
    const session = res.headers.get('mcp-session-id');
    assert.ok(session, 'initialize answers with Mcp-Session-Id');
    return session;
  };

  it('a 2025-era request naming a revision the server does not speak: HTTP 400 on every method, no task made', async () => {
    const session = await legacySession();
    const before = await taskKeys();
    // 2025-03-26 is a revision the SDK knows, but not one `initialize` here ever settles on.
    for (const version of ['1999-01-01', '2025-03-26']) {
      for (const { method, params } of legacyCalls) {
        const res = await post(JSON.stringify({ jsonrpc: '2.0', id: 4, method, params }), {
          'mcp-session-id': session,
          'mcp-protocol-version': version,
        });
        const text = await res.text();
        assert.equal(res.status, 400, `${version} ${method}: ${text.slice(0, 200)}`);
        assert.match(JSON.parse(text).error?.message, /Unsupported protocol version/, `${version} ${method}`);
      }
    }
    assert.deepEqual(await taskKeys(), before);
  });

  it('a 2025-era request that does not accept both JSON and SSE: 406 on every method, as the SDK transport answers', async () => {
    const session = await legacySession();
    const before = await taskKeys();
    for (const accept of ['application/json', 'text/event-stream', '*/*']) {
      for (const { method, params } of legacyCalls) {
        const res = await post(JSON.stringify({ jsonrpc: '2.0', id: 5, method, params }), {
          accept,
          'mcp-session-id': session,
          'mcp-protocol-version': '2025-11-25',
        });
        const text = await res.text();
        assert.equal(res.status, 406, `${accept} ${method}: ${text.slice(0, 200)}`);
        assert.equal(JSON.parse(text).error?.code, -32000, `${accept} ${method}`);
      }
    }
    assert.deepEqual(await taskKeys(), before);
  });

  it('a 2025-era POST whose Content-Type is not application/json: 415 on every method, as the SDK transport answers, no task made', async () => {
    const session = await legacySession();
    const before = await taskKeys();
    // The media type is parsed, never searched: the last one merely mentions application/json.
    for (const type of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'text/plain; a=application/json',
    ]) {
      for (const { method, params } of legacyCalls) {
        const res = await post(JSON.stringify({ jsonrpc: '2.0', id: 6, method, params }), {
          'content-type': type,
          'mcp-session-id': session,
          'mcp-protocol-version': '2025-11-25',
        });
        const text = await res.text();
        assert.equal(res.status, 415, `${type} ${method}: ${text.slice(0, 200)}`);
        assert.equal(JSON.parse(text).error?.code, -32000, `${type} ${method}`);
      }
      const res = await post(JSON.stringify(initializeRequest('2025-11-25')), { 'content-type': type });
      assert.equal(res.status, 415, `${type} initialize: ${(await res.text()).slice(0, 200)}`);
      assert.equal(res.headers.get('mcp-session-id'), null, `${type} initialize`);
    }
    assert.deepEqual(await taskKeys(), before);
  });

  it('initialize sent as a notification (no id): -32600, and no session is opened', async () => {
    const { id: _, ...notification } = initializeRequest('2025-11-25');
    const res = await post(JSON.stringify(notification));
    const text = await res.text();
    assert.equal(res.status, 400, text);
    assert.equal(JSON.parse(text).error?.code, -32600, text);
    assert.equal(res.headers.get('mcp-session-id'), null);
  });

  it('GET on the endpoint: HTTP 405', async () => {
    const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(res.status, 405);
  });

  it('an Mcp-Method header that contradicts the body: -32020, HTTP 400', async () => {
    const res = await rpc(url, 'tools/list', {}, { token, headers: { 'mcp-method': 'prompts/list' } });
    assert.equal(res.status, 400);
    assert.equal(res.message.error.code, -32020);
  });

  it('an unsupported protocol version: -32022, HTTP 400', async () => {
    const res = await post(
      JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/list',
        params: {
          _meta: {
            'io.modelcontextprotocol/protocolVersion': '1999-01-01',
            'io.modelcontextprotocol/clientCapabilities': {},
          },
        },
      }),
      { 'mcp-method': 'tools/list', 'mcp-protocol-version': '1999-01-01' },
    );
    assert.equal(res.status, 400);
    assert.equal(((await res.json()) as any).error.code, -32022);
  });

  it('a task listen and a task tool call are checked as every 2026-07-28 request is, never served around it', async () => {
    const meta = (version: string, tasks = true) => ({
      'io.modelcontextprotocol/protocolVersion': version,
      'io.modelcontextprotocol/clientInfo': { name: 't', version: '1' },
      'io.modelcontextprotocol/clientCapabilities': tasks ? { extensions: { [TASKS]: {} } } : {},
    });
    const listen = (version: string) => ({
      jsonrpc: '2.0',
      id: 7,
      method: 'subscriptions/listen',
      params: { notifications: { taskIds: ['task_00000000000000000000000000'] }, _meta: meta(version) },
    });
    const call = (version: string) => ({
      jsonrpc: '2.0',
      id: 8,
      method: 'tools/call',
      params: {
        name: 'generate',
        arguments: { model: 'tiny-chat', input: 'x' },
        _meta: meta(version, false),
      },
    });
    const modern = { 'mcp-protocol-version': '2026-07-28' };
    const cases: [string, object, Record<string, string>, number, number][] = [
      // An unsupported revision in the envelope, with no header to contradict it: -32022.
      ['listen, 1999-01-01', listen('1999-01-01'), { 'mcp-method': 'subscriptions/listen' }, 400, -32022],
      [
        'call, 1999-01-01',
        call('1999-01-01'),
        { 'mcp-method': 'tools/call', 'mcp-name': 'generate' },
        400,
        -32022,
      ],
      // The required MCP-Protocol-Version and Mcp-Method headers: -32020.
      [
        'listen, no version header',
        listen('2026-07-28'),
        { 'mcp-method': 'subscriptions/listen' },
        400,
        -32020,
      ],
      ['listen, no method header', listen('2026-07-28'), modern, 400, -32020],
      [
        'listen, other method header',
        listen('2026-07-28'),
        { ...modern, 'mcp-method': 'tools/list' },
        400,
        -32020,
      ],
      [
        'call, no version header',
        call('2026-07-28'),
        { 'mcp-method': 'tools/call', 'mcp-name': 'generate' },
        400,
        -32020,
      ],
      // A body that is not application/json: 415, as the SDK answers any other request.
      [
        'listen, text/plain',
        listen('2026-07-28'),
        { ...modern, 'mcp-method': 'subscriptions/listen', 'content-type': 'text/plain' },
        415,
        -32000,
      ],
      // A notification (no id) gets no response, so a listen sent as one is no listen: -32600.
      [
        'listen as a notification',
        { ...listen('2026-07-28'), id: undefined },
        { ...modern, 'mcp-method': 'subscriptions/listen' },
        400,
        -32600,
      ],
    ];
    for (const [what, body, headers, status, code] of cases) {
      const res = await post(JSON.stringify(body), headers);
      const text = await res.text();
      assert.equal(res.status, status, `${what}: ${text.slice(0, 200)}`);
      assert.equal(JSON.parse(text).error?.code, code, `${what}: ${text.slice(0, 200)}`);
    }
  });

  it('tasks/list does not exist: -32601', async () => {
    const res = await rpc(url, 'tasks/list', {}, { token });
    assert.equal(res.message.error.code, -32601);
  });

  it('tasks/get, tasks/update and tasks/cancel of an unknown task: the same -32602', async () => {
    const errors = [];
    for (const method of ['tasks/get', 'tasks/update', 'tasks/cancel']) {
      const res = await rpc(url, method, { taskId: 'task_unknown', inputResponses: {} }, { token });
      errors.push(res.message.error);
    }
    assert.deepEqual(
      errors.map((e) => e.code),
      [-32602, -32602, -32602],
    );
    assert.equal(new Set(errors.map((e) => e.message)).size, 1);
  });

  it('an LMSP task reads as unknown on either era, as an MCP tool task does on LMSP', async () => {
    const created = await fetch(url.replace(/\/mcp$/, '/lmsp/v1/tasks'), {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ type: 'response', input: { model: 'tiny-chat', input: 'hello' } }),
    });
    assert.equal(created.status, 202);
    const taskId = ((await created.json()) as any).id as string;
    for (const method of ['tasks/get', 'tasks/update', 'tasks/cancel']) {
      const res = await rpc(url, method, { taskId, inputResponses: {} }, { token });
      assert.equal(res.message.error?.code, -32602, `2026-07-28 ${method}`);
    }
    const session = await legacySession();
    for (const method of ['tasks/get', 'tasks/result', 'tasks/cancel']) {
      const res = await post(JSON.stringify({ jsonrpc: '2.0', id: 3, method, params: { taskId } }), {
        'mcp-session-id': session,
        'mcp-protocol-version': '2025-11-25',
      });
      assert.equal(((await res.json()) as any).error?.code, -32602, `2025-11-25 ${method}`);
    }
    const lmsp = await fetch(url.replace(/\/mcp$/, `/lmsp/v1/tasks/${taskId}`), {
      headers: { authorization: `Bearer ${token}` },
    });
    const { status } = (await lmsp.json()) as any;
    assert.ok(!['cancelling', 'cancelled'].includes(status), `never cancelled from MCP: ${status}`);
  });

  it('an unknown tool: a JSON-RPC error, never a task', async () => {
    const res = await rpc(url, 'tools/call', { name: 'no_such_tool', arguments: {} }, { token });
    assert.ok(res.message.error, JSON.stringify(res.message));
    assert.equal(res.message.result, undefined);
  });

  const taskKeys = async () => (await scanKeys(stack.cluster.store.redis, 'tl:{task_*}:task')).sort();

  it('tools/list describes every field of generate and batch_generate; model lists the served models', async () => {
    const { tools } = (await rpc(url, 'tools/list', {}, { token })).message.result;
    for (const name of ['generate', 'batch_generate']) {
      const props = tools.find((t: any) => t.name === name).inputSchema.properties;
      for (const [field, schema] of Object.entries<any>(props))
        assert.ok(schema.description, `${name}.${field} has a description`);
      assert.deepEqual(props.model.enum, ['tiny-chat'], `${name}.model is an enum of TASKLINE_MODELS`);
    }
  });

  it('generate on a model this deployment does not serve: refused at once, never a task', async () => {
    const before = await taskKeys();
    const res = await rpc(
      url,
      'tools/call',
      { name: 'generate', arguments: { model: 'no-such-model', input: 'Hello' } },
      { token },
    );
    assert.equal(res.message.result?.isError, true, JSON.stringify(res.message));
    assert.notEqual(res.message.result.resultType, 'task');
    // The schema lists the served models (an enum), so the call is refused naming them.
    assert.match(res.message.result.content[0].text, /model.*"tiny-chat"/);
    assert.deepEqual(await taskKeys(), before);
  });

  it('generate and batch_generate over TASKLINE_MAX_OUTPUT_TOKENS: refused as LMSP refuses', async () => {
    const over = 4097; // the default cap is 4096
    const lmsp = await fetch(url.replace(/\/mcp$/, '/lmsp/v1/tasks'), {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({
        type: 'response',
        input: { model: 'tiny-chat', input: 'Hello', max_output_tokens: over },
      }),
    });
    assert.equal(lmsp.status, 400);
    const problem = (await lmsp.json()) as any;
    const before = await taskKeys();
    for (const [name, args] of [
      ['generate', { model: 'tiny-chat', input: 'Hello', max_output_tokens: over }],
      ['batch_generate', { model: 'tiny-chat', prompts: ['Hello'], max_output_tokens: over }],
    ] as const) {
      const res = await rpc(url, 'tools/call', { name, arguments: args }, { token });
      assert.equal(res.message.result?.isError, true, JSON.stringify(res.message));
      assert.equal(res.message.result.content[0].text, problem.detail);
    }
    assert.deepEqual(await taskKeys(), before);
  });

  it('a bearer token the authenticator does not know: -32001, HTTP 401', async () => {
    const res = await rpc(url, 'tools/list', {}, { token: 'not-a-known-key' });
    assert.equal(res.status, 401);
    assert.equal(res.message.error.code, -32001);
  });
});
