/**
 * A tool's `ctx.progress` reaches a caller that gave a progressToken as MCP `notifications/progress`
 * (MCP 2025-11-25, Progress), on a call that waits for the tool's end, at 2026-07-28 and
 * 2025-11-25 alike; and the 2025 surface does not advertise `tools.listChanged`, which it never
 * sends (docs/mcp.md). Real api, scheduler and tool worker; official SDK clients.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { EngineStack } from '@taskline/test-support/engine-stack';
import type { Replica } from '@taskline/test-support/mcp-stack';
import { KEY_A, LONG_LEASE, startOneApiToolStack, toolWorker } from './helpers.js';

const INFO = { name: 'progress-test', version: '1.0.0' };
const auth = { requestInit: { headers: { authorization: `Bearer ${KEY_A}` } } };
const COUNT = 4;

interface Progress {
  progress: number;
  total?: number;
  message?: string;
}

/** What each progress notification said, as `<progress>/<total> <message>`. */
const said = (seen: Progress[]) => seen.map((p) => `${p.progress}/${p.total} ${p.message}`);

describe('MCP progress notifications from ctx.progress', () => {
  let cluster: EngineStack;
  let api: Replica;
  before(async () => {
    ({ cluster, api } = await startOneApiToolStack());
    // Never stopped: a 10 s lease (LONG_LEASE), which a starved host does not let lapse, so every
    // notification below is attempt 1's.
    await toolWorker(cluster, 'steps.ts', { STEPS_STEP_MS: '200', ...LONG_LEASE });
  });
  after(() => cluster.stop());

  // steps_* reports `attempt 1 step <s>` with progress s of COUNT before each step; MCP wants each
  // notification's progress above the last, so the first (0) is sent as is and every later one too.
  const EXPECTED = [0, 1, 2, 3].map((s) => `${s}/${COUNT} attempt 1 step ${s}`);

  it('2026-07-28: a waiting tools/call with a progressToken gets notifications/progress', async () => {
    const client = new Client(INFO, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await client.connect(new StreamableHTTPClientTransport(new URL(api.url), auth));
    try {
      const seen: Progress[] = [];
      const result = await client.callTool(
        { name: 'steps_fail', arguments: { count: COUNT } },
        { onprogress: (p: Progress) => seen.push(p) },
      );
      assert.equal(result.isError, undefined, JSON.stringify(result));
      assert.deepEqual(said(seen), EXPECTED);
    } finally {
      await client.close();
    }
  });

  it('2025-11-25: a waiting tools/call with a progressToken gets notifications/progress', async () => {
    const client = new V1Client(INFO, { capabilities: {} });
    await client.connect(new V1Transport(new URL(api.url), auth));
    try {
      const seen: Progress[] = [];
      const result = await client.callTool({ name: 'steps_fail', arguments: { count: COUNT } }, undefined, {
        onprogress: (p) => seen.push(p),
      });
      assert.ok(!result.isError, JSON.stringify(result));
      assert.deepEqual(said(seen), EXPECTED);
    } finally {
      await client.close();
    }
  });

  it('2025-11-25: tools.listChanged is not advertised (the live registry is re-read, not pushed)', async () => {
    const client = new V1Client(INFO, { capabilities: {} });
    await client.connect(new V1Transport(new URL(api.url), auth));
    try {
      assert.deepEqual(client.getServerCapabilities()?.tools, {});
    } finally {
      await client.close();
    }
  });
});
