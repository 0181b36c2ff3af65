/**
 * A team's module as its image holds it: its own copies of @taskline/tool-sdk and zod, beside the
 * tool worker's. The worker loads and checks its tools, and a ToolFailure thrown from that copy is
 * still a ToolFailure to the runtime. No process: the module is imported here.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ToolFailure, type ToolDefinition } from '@taskline/tool-sdk';
import { checkTools, loadToolModule } from '../src/index.js';

const SDK = 'packages/tool-sdk';

describe('a tool module with its own copies of the SDK and zod', () => {
  let dir: string;
  let tools: ToolDefinition[];
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tool-module-copies-'));
    const modules = join(dir, 'node_modules');
    mkdirSync(join(modules, '@taskline/tool-sdk'), { recursive: true });
    cpSync(realpathSync(`${SDK}/node_modules/zod`), join(modules, 'zod'), { recursive: true });
    for (const part of ['package.json', 'dist'])
      cpSync(`${SDK}/${part}`, join(modules, '@taskline/tool-sdk', part), { recursive: true });
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
    writeFileSync(
      join(dir, 'tools.js'),
      [
        "import { z } from 'zod';",
        "import { defineTool, ToolFailure } from '@taskline/tool-sdk';",
        'export const refuses = defineTool({',
        "  name: 'refuses', description: 'Always fails.', taskSupport: 'required',",
        "  inputSchema: z.object({ reason: z.string().describe('Why.') }),",
        '  outputSchema: z.object({ never: z.boolean() }),',
        '  async run({ reason }) { throw new ToolFailure(reason); },',
        '});',
      ].join('\n'),
    );
    tools = await loadToolModule(join(dir, 'tools.js'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('loads and checks its tools, schemas rendered with their descriptions', () => {
    const [entry] = checkTools(tools, '');
    assert.equal(entry?.name, 'refuses');
    assert.deepEqual((entry?.inputSchema.properties as Record<string, unknown>).reason, {
      type: 'string',
      description: 'Why.',
    });
    const output = entry?.outputSchema?.properties as Record<string, { type: string }> | undefined;
    assert.equal(output?.never?.type, 'boolean');
  });

  it("its ToolFailure is the runtime's ToolFailure (the task fails, it is no isError result)", async () => {
    const thrown = await tools[0]!.run({ reason: 'no' }, {} as never).catch((err: unknown) => err);
    assert.ok(!(thrown instanceof Error && thrown.constructor === ToolFailure), 'a separate copy');
    assert.ok(thrown instanceof ToolFailure, 'thrown instanceof ToolFailure');
    assert.ok(!(new Error('no') instanceof ToolFailure), "!(new Error('no') instanceof ToolFailure)");
  });
});
