// Every engine error code has its JSON-RPC error on MCP: a code added to the engine alone fails here.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ERROR_CODES } from '@taskline/engine';
import { MCP_ERRORS, RATE_LIMITED_CODE, UNAVAILABLE_CODE } from '../src/errors.js';

test('every engine error code has a JSON-RPC error on MCP, and the table names no other code', () => {
  for (const code of ERROR_CODES) {
    const { rpc, http } = MCP_ERRORS[code];
    assert.ok(Number.isInteger(rpc) && rpc <= -32000 && rpc >= -32768, `${code}: JSON-RPC ${rpc}`);
    assert.ok(Number.isInteger(http) && http >= 200 && http < 600, `${code}: HTTP ${http}`);
  }
  assert.deepEqual(Object.keys(MCP_ERRORS).sort(), [...ERROR_CODES].sort());
});

test('overload answers 429 or 503, which a client retries; a missing task is invalid params', () => {
  assert.deepEqual(MCP_ERRORS.rate_limited, { rpc: RATE_LIMITED_CODE, http: 429 });
  assert.deepEqual(MCP_ERRORS.too_many_auth_failures, { rpc: RATE_LIMITED_CODE, http: 429 });
  assert.deepEqual(MCP_ERRORS.unavailable, { rpc: UNAVAILABLE_CODE, http: 503 });
  assert.deepEqual(MCP_ERRORS.replication_timeout, { rpc: UNAVAILABLE_CODE, http: 503 });
  assert.equal(MCP_ERRORS.task_not_found.rpc, -32602);
});
