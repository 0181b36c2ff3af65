import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { buildOpenApi } from '../src/lmsp/openapi.js';
import { call, startApi, startStack, type InProcessApi, type Stack } from './helpers.js';
import { openapiDoc, validateDocument } from './openapi-check.js';

let stack: Stack;
let api: InProcessApi;
before(async () => {
  stack = await startStack();
  api = await startApi(stack);
});
after(async () => {
  await api.close();
  await stack.close();
});

test('the committed openapi.json is a valid OpenAPI 3.1 document', async () => {
  await validateDocument();
});

test('the committed document is what the code builds (regenerate: pnpm --filter @taskline/api openapi)', () => {
  assert.deepEqual(JSON.parse(JSON.stringify(buildOpenApi())), openapiDoc);
});

test('the API serves the same document at /lmsp/v1/openapi.json', async () => {
  const r = await call(api.base, 'GET', '/lmsp/v1/openapi.json');
  assert.equal(r.status, 200);
  assert.deepEqual(r.body, openapiDoc);
});
