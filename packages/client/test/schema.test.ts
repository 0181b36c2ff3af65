import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import openapiTS, { astToString } from 'openapi-typescript';
import * as prettier from 'prettier';

const at = (path: string) => fileURLToPath(new URL(path, import.meta.url));

test('the LMSP types are generated from the api OpenAPI document as it is now', async () => {
  const doc = JSON.parse(readFileSync(at('../../../services/api/openapi.json'), 'utf8')) as object;
  const target = at('../src/lmsp-schema.ts');
  const options = await prettier.resolveConfig(target);
  const expected = await prettier.format(astToString(await openapiTS(doc as never)), {
    ...options,
    filepath: target,
  });
  // The committed file starts with the generator's "do not edit" banner.
  const committed = readFileSync(target, 'utf8').replace(/^\/\*\*[\s\S]*?\*\/\n\n/, '');
  // Not assert.equal: its diff of two long texts that differ runs for many minutes on one core.
  assert.ok(committed === expected, 'run `pnpm --filter @taskline/client types` after changing openapi.json');
});
