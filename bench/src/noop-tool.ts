// The benchmark's tool module for a tool worker (item 10): a no-op tool that says when its `run` began.
import { z } from 'zod';
import { defineTool } from '@taskline/tool-sdk';

/** Does nothing but answer the time (epoch ms, this host's clock) its `run` was entered. */
export const noop = defineTool({
  name: 'bench_noop',
  description: 'Does nothing; answers when its run started (the benchmark of tool dispatch).',
  taskSupport: 'optional',
  inputSchema: z.object({}),
  concurrency: 8,
  async run() {
    const runStartedAt = Date.now();
    return { content: [{ type: 'text', text: String(runStartedAt) }], structuredContent: { runStartedAt } };
  },
});
