/**
 * A tool served to named tenants only (TASKLINE_TOOL_TENANTS): its tenant lists and calls it;
 * another tenant neither sees it nor reaches it, and gets byte for byte the answer it gets for the
 * same name before any worker served it (the unknown-tool error), on both MCP eras; so too once
 * its pool is at zero, while its own tenant still lists it and its calls queue.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { EngineStack } from '@taskline/test-support/engine-stack';
import type { Replica } from '@taskline/test-support/mcp-stack';
import { initializeRequest, post2025, rpc } from '@taskline/test-support/mcp';
import { until } from '@taskline/testing';
import { LiveTools } from '@taskline/tools';
import { KEY_A, KEY_B, list2025, list2026, startOneApiToolStack, toolWorker } from './helpers.js';

const CALL = { name: 'private_echo', arguments: { text: 'hello' } };

/** A 2026-07-28 `tools/call` of CALL by `key`, id 7 every time: its status and body as sent. */
async function call2026(url: string, key: string): Promise<string> {
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-method': 'tools/call',
      'mcp-name': CALL.name,
      'mcp-protocol-version': '2026-07-28',
      authorization: `Bearer ${key}`,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 7,
      method: 'tools/call',
      params: {
        ...CALL,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientInfo': { name: 'test', version: '1' },
          'io.modelcontextprotocol/clientCapabilities': {},
        },
      },
    }),
  });
  return `${res.status} ${res.headers.get('content-type')}\n${await res.text()}`;
}

/** A 2025-11-25 `tools/call` of CALL by `key` in `session`: its status and body as sent. */
async function call2025(url: string, key: string, session: string): Promise<string> {
  const res = await post2025(url, key, { method: 'tools/call', params: CALL }, session);
  return `${res.status} ${res.headers.get('content-type')}\n${await res.text()}`;
}

describe('a private tool and another tenant', () => {
  let cluster: EngineStack;
  let api: Replica;
  before(async () => {
    ({ cluster, api } = await startOneApiToolStack());
  });
  after(() => cluster.stop());

  it('is invisible and unreachable to the other tenant, answered exactly as an unknown tool', async () => {
    const init = await post2025(api.url, KEY_B, initializeRequest('2025-11-25'));
    const session = init.headers.get('mcp-session-id')!;
    assert.ok(session, 'session');
    const before2026 = await call2026(api.url, KEY_B);
    const before2025 = await call2025(api.url, KEY_B, session);
    /** The other tenant lists no such tool and, calling it, gets what an unknown tool gets. */
    const unseenByB = async () => {
      assert.ok(!(await list2026(api.url, KEY_B)).includes('private_echo'), 'listed to B on 2026-07-28');
      assert.ok(!(await list2025(api.url, KEY_B)).includes('private_echo'), 'listed to B on 2025-11-25');
      assert.equal(await call2026(api.url, KEY_B), before2026);
      assert.equal(await call2025(api.url, KEY_B, session), before2025);
    };
    // What an unknown tool gets: the SDKs' "not found" (an error, on either era), no task made.
    assert.match(before2026, /Tool private_echo not found/);
    assert.match(before2025, /Tool private_echo not found/);

    const worker = await toolWorker(cluster, 'private.ts', { TASKLINE_TOOL_TENANTS: 'tenant-a' });
    await until(
      'tenant-a lists private_echo',
      async () => ((await list2026(api.url, KEY_A)).includes('private_echo') ? true : undefined),
      5000,
    );
    assert.ok(
      (await list2025(api.url, KEY_A)).includes('private_echo'),
      "(await list2025(api.url, KEY_A)).includes('private_echo')",
    );
    const own = await rpc(api.url, 'tools/call', CALL, { token: KEY_A, tasks: false });
    assert.deepEqual(own.message.result?.content, [{ type: 'text', text: 'hello' }]);

    await unseenByB();
    await worker.kill('SIGTERM');

    // Its pool at zero: still its tenant's (listed, a call queues), still nobody else's.
    await until('no live worker left', async () =>
      (await new LiveTools(cluster.store.redis, { cacheMs: 0 }).workers()).length === 0 ? true : undefined,
    );
    assert.ok(
      (await list2026(api.url, KEY_A)).includes('private_echo'),
      "(await list2026(api.url, KEY_A)).includes('private_echo')",
    );
    assert.ok(
      (await list2025(api.url, KEY_A)).includes('private_echo'),
      "(await list2025(api.url, KEY_A)).includes('private_echo')",
    );
    const queued = await rpc(api.url, 'tools/call', CALL, { token: KEY_A });
    const id = queued.message.result?.taskId as string;
    assert.equal((await cluster.store.get(id))?.status, 'queued', JSON.stringify(queued.message));
    await unseenByB();
  });
});
