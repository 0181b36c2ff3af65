/**
 * The SDK's checks of a tool definition (what a tool worker runs at start) and its types: `args`
 * is inferred from the input schema. No process, no Redis.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { z } from 'zod';
import {
  defineTool,
  InvalidToolError,
  isToolDefinition,
  validateTool,
  type ToolDefinition,
} from '../src/index.js';

const valid = defineTool({
  name: 'run_ci_pipeline',
  title: 'Run a CI pipeline',
  description: 'Runs the steps of a pipeline.',
  inputSchema: z.object({ repo: z.string(), steps: z.array(z.string()).default(['test']) }),
  outputSchema: z.object({ passed: z.boolean() }),
  taskSupport: 'required',
  onRestart: 'resume',
  concurrency: 4,
  async run(args, ctx) {
    // Type-level: these compile only because `args` is inferred from inputSchema.
    const repo: string = args.repo;
    const steps: string[] = args.steps;
    await ctx.progress(`${repo}: ${steps.length} steps`, { progress: 0, total: steps.length });
    return { content: [], structuredContent: { passed: true } };
  },
});

/** `valid` with `change` applied, as a plain definition (what a module may export). */
const variant = (change: Record<string, unknown>) => ({ ...valid, ...change }) as unknown as ToolDefinition;

describe('validateTool', () => {
  it('returns the JSON schemas a tool is listed with', () => {
    const { inputSchema, outputSchema } = validateTool(valid as unknown as ToolDefinition);
    assert.equal(inputSchema.type, 'object');
    assert.deepEqual(inputSchema.required, ['repo']);
    assert.deepEqual(Object.keys(inputSchema.properties as object), ['repo', 'steps']);
    assert.equal(outputSchema?.type, 'object');
  });

  const refusals: [string, Record<string, unknown>, RegExp][] = [
    ['a name with a space', { name: 'run ci' }, /name must be 1-128/],
    ['an empty name', { name: '' }, /name must be 1-128/],
    ['a name of 129 characters', { name: 'x'.repeat(129) }, /name must be 1-128/],
    ['no description', { description: '' }, /description must be a non-empty string/],
    ['an unknown taskSupport', { taskSupport: 'sometimes' }, /taskSupport must be one of/],
    ['an unknown onRestart', { onRestart: 'again' }, /onRestart must be one of fail, retry, resume/],
    ['a concurrency of 0', { concurrency: 0 }, /concurrency must be an integer from 1/],
    ['a fractional concurrency', { concurrency: 1.5 }, /concurrency must be an integer/],
    [
      'an input schema that is not a zod object',
      { inputSchema: { type: 'object' } },
      /inputSchema must be a zod object/,
    ],
    [
      'an input schema JSON Schema cannot show',
      { inputSchema: z.object({ at: z.date() }) },
      /inputSchema cannot be shown as JSON Schema/,
    ],
    ['an output schema that is a string', { outputSchema: z.string() }, /outputSchema must be a zod object/],
    ['no run function', { run: 'go' }, /run must be a function/],
  ];
  for (const [what, change, message] of refusals) {
    it(`refuses ${what}, naming the tool`, () => {
      assert.throws(
        () => validateTool(variant(change)),
        (err: unknown) =>
          err instanceof InvalidToolError && message.test(err.message) && err.message.startsWith('tool "'),
      );
    });
  }
});

describe('isToolDefinition', () => {
  it('tells tools from the other exports of a module', () => {
    assert.equal(isToolDefinition(valid), true);
    assert.equal(isToolDefinition({ name: 'x' }), false);
    assert.equal(isToolDefinition('run_ci_pipeline'), false);
    assert.equal(isToolDefinition(null), false);
  });
});
