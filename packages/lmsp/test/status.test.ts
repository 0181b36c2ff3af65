// Every engine error code has its HTTP status: a code added to the engine alone fails here.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ERROR_CODES } from '@taskline/engine/core';
import { HTTP_STATUS, isCallersFault } from '../src/index.js';

test('every engine error code has an HTTP status, and the table names no other code', () => {
  for (const code of ERROR_CODES) {
    const status = HTTP_STATUS[code];
    assert.ok(Number.isInteger(status) && status >= 400 && status < 600, `${code}: ${status}`);
  }
  assert.deepEqual(Object.keys(HTTP_STATUS).sort(), [...ERROR_CODES].sort());
});

test("a 4xx code is the caller's to fix, a 5xx code the server's", () => {
  assert.equal(isCallersFault('invalid_request'), true);
  assert.equal(isCallersFault('input_timeout'), true);
  assert.equal(isCallersFault('internal_error'), false);
  assert.equal(isCallersFault('replication_timeout'), false);
});
