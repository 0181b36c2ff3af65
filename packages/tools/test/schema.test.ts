/* eslint-disable @typescript-eslint/no-explicit-any -- JSON Schema is checked field by field */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { z } from 'zod';
import { builtinTools, modelChoice } from '../src/index.js';

const env = (models: string, fallback = '') => ({
  TASKLINE_MODELS: models,
  TASKLINE_DEFAULT_MODEL: fallback,
});

describe('generation tool schemas', () => {
  it('list the served models as an enum, with the configured default', () => {
    const tools = builtinTools({
      batchConfirmAboveTokens: 1,
      models: modelChoice(env('a,b', 'b')),
    });
    for (const name of ['generate', 'batch_generate']) {
      const schema = tools.get(name)!.inputSchema;
      const json = z.toJSONSchema(schema, { io: 'input' }) as { properties: Record<string, any> };
      assert.deepEqual(json.properties.model.enum, ['a', 'b']);
      assert.equal(json.properties.model.default, 'b');
      for (const [field, prop] of Object.entries(json.properties))
        assert.ok(prop.description, `${name}.${field}`);
      assert.equal(schema.safeParse({ model: 'c', input: 'x', prompts: ['x'] }).success, false);
    }
    const parsed = tools.get('generate')!.inputSchema.parse({ input: 'x' }) as { model: string };
    assert.equal(parsed.model, 'b', 'a call naming no model gets the default');
  });

  it('without a default, model is required', () => {
    const tools = builtinTools({
      batchConfirmAboveTokens: 1,
      models: modelChoice(env('a')),
    });
    assert.equal(tools.get('generate')!.inputSchema.safeParse({ input: 'x' }).success, false);
  });

  it('refuses a default that is not served, at start-up', () => {
    assert.throws(
      () => modelChoice(env('a', 'z')),
      /TASKLINE_DEFAULT_MODEL "z" is not one of TASKLINE_MODELS/,
    );
  });
});
