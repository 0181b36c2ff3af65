/**
 * Bad input on every MCP method, property-based (fast-check): hostile params, envelopes and bodies
 * from tenant B. Only JSON-RPC errors, the process stays up, and no stored task changes.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { newId } from '@taskline/engine';
import { KEYS, mcp, mcpBody, mcpHeaders, send } from '../src/client.js';
import { holds, hostileString, hostileValue, RUNS, useFuzzStack } from './fuzz-harness.js';

describe('fuzzing every MCP method with hostile input', () => {
  const fuzz = useFuzzStack();

  it('MCP: every method with hostile params, envelopes and bodies', async () => {
    const methods = [
      'server/discover',
      'tools/list',
      'tools/call',
      'tasks/get',
      'tasks/update',
      'tasks/cancel',
      'tasks/list',
      'subscriptions/listen',
      'ping',
      'initialize',
      'resources/list',
      'prompts/list',
      'completion/complete',
      'logging/setLevel',
      'notifications/cancelled',
    ];
    const taskIdArb = fc.oneof(
      hostileString,
      fc.constant(null).map(() => newId('task')),
      fc.constantFrom(...fuzz.owned),
    );
    const paramsArb = fc.oneof(
      fc.dictionary(hostileString, hostileValue, { maxKeys: 4 }),
      taskIdArb.map((taskId) => ({ taskId })),
      fc.record({ taskId: taskIdArb, inputResponses: hostileValue }),
      fc.record({
        name: fc.constantFrom('generate', 'slow_compute', 'nope', '__proto__'),
        arguments: hostileValue,
      }),
      fc.array(taskIdArb, { maxLength: 5 }).map((taskIds) => ({ notifications: { taskIds } })),
    );
    await holds(
      fc.asyncProperty(
        fc.oneof(fc.constantFrom(...methods), hostileString),
        paramsArb,
        fc.oneof(fc.integer(), hostileString, fc.constant(null)),
        fc.boolean(),
        async (method, params, id, tasks) => {
          // Tenant B only: every task it can name belongs to A or to no one, so nothing may change.
          const headers = mcpHeaders(
            KEYS.b,
            /^[\x20-\x7e]*$/.test(method) ? method.slice(0, 200) : 'tools/call',
          );
          const r = await send(fuzz.api.base, 'POST', '/mcp', {
            headers,
            body: JSON.stringify(mcpBody(id, method, params as Record<string, unknown>, tasks)),
            timeoutMs: 10_000,
          });
          fuzz.mcpOk(r, `${method.slice(0, 60)} ${JSON.stringify(params).slice(0, 200)}`);
        },
      ),
      RUNS * 2,
    );
    for (const [what, body] of [
      ['not JSON', '{"jsonrpc":'],
      ['batch', JSON.stringify([mcpBody(1, 'ping'), mcpBody(2, 'tools/list')])],
      ['empty batch', '[]'],
      ['no method', JSON.stringify({ jsonrpc: '2.0', id: 1 })],
      ['wrong version', JSON.stringify({ ...mcpBody(1, 'ping'), jsonrpc: '1.0' })],
      [
        'huge',
        JSON.stringify(
          mcpBody(1, 'tools/call', { name: 'generate', arguments: { prompt: 'x'.repeat(2_000_000) } }),
        ),
      ],
      [
        'deep',
        JSON.stringify(mcpBody(1, 'tasks/get', { taskId: fuzz.owned[0] })).replace(
          '"taskId"',
          '"deep":' + '['.repeat(100_000) + ']'.repeat(100_000) + ',"taskId"',
        ),
      ],
    ] as const) {
      const r = await send(fuzz.api.base, 'POST', '/mcp', { headers: mcpHeaders(KEYS.b, 'ping'), body });
      fuzz.mcpOk(r, what);
    }
    for (const method of ['GET', 'PUT', 'DELETE']) {
      const r = await send(fuzz.api.base, method, '/mcp', { headers: mcpHeaders(KEYS.b, 'ping') });
      fuzz.mcpOk(r, `${method} /mcp`);
    }
    const { message } = await mcp(fuzz.api.base, KEYS.b, 'tasks/get', { taskId: fuzz.owned[0] });
    assert.equal(message?.error?.code, -32602, 'a foreign task id is unknown');
    await fuzz.unchanged();
  });
});
