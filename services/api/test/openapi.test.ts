import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildOpenApi } from '../src/lmsp/openapi.js';
import { call, type InProcessApi, useStackWithApi } from './helpers.js';
import { openapiDoc, validateDocument } from './openapi-check.js';

let api: InProcessApi;
useStackWithApi((_stack, a) => (api = a));

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
