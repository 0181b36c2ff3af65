// The `batch_generate` example tool: generations with progress and a confirmation.
import { z } from 'zod';
import { defineTool, ToolFailure } from '@taskline/tool-sdk';
import { checkGeneration, modelField, type ModelChoice } from './api.js';

export interface BatchOptions {
  /** Cost units above which a tenant confirms a batch before it runs. */
  confirmAbove(tenant: string): number;
  /** Estimated cost of one prompt: defaults to its length plus the output budget, in tokens. */
  estimate?(prompt: string, maxOutputTokens: number): number;
  /** The served models the schema's `model` offers (see `modelField`). */
  models?: ModelChoice;
}

/**
 * Example tool built on the public API: generates every prompt of a batch, reports progress, and
 * asks for confirmation first when the estimate exceeds the tenant's threshold; a caller that
 * cannot be asked gets the batch refused (an isError result), never run unconfirmed.
 */
export function batchGenerateTool(options: BatchOptions) {
  const estimate = options.estimate ?? ((prompt, max) => Math.ceil(prompt.length / 4) + max);
  return defineTool({
    name: 'batch_generate',
    description:
      'Generates a completion for each prompt of a batch, with progress; confirms large batches first.',
    taskSupport: 'optional',
    // A new attempt replays the steps: each generation is a child task created idempotently, never run twice.
    onRestart: 'retry',
    inputSchema: z.object({
      model: modelField(options.models),
      prompts: z
        .array(z.string().min(1))
        .min(1)
        .max(1000)
        .describe('The prompts, 1 to 1000: each gets its own completion, in this order.'),
      max_output_tokens: z
        .number()
        .int()
        .positive()
        .default(64)
        .describe("Most tokens to generate per prompt (default 64); at most the deployment's cap."),
    }),
    prepare(args, _responses, served) {
      checkGeneration(served, args.model, args.max_output_tokens);
      return { args };
    },
    async run(args, ctx) {
      const cost = args.prompts.reduce((sum, p) => sum + estimate(p, args.max_output_tokens), 0);
      const threshold = options.confirmAbove(ctx.tenant);
      if (cost > threshold) {
        const { confirm } = await ctx.ask({
          confirm: {
            method: 'elicitation/create',
            params: {
              mode: 'form',
              message: `This batch of ${args.prompts.length} prompts is estimated at ${cost} tokens (your threshold is ${threshold}). Run it?`,
              requestedSchema: {
                type: 'object',
                properties: { proceed: { type: 'boolean' } },
                required: ['proceed'],
              },
            },
          },
        });
        const answer = confirm as { action?: string; content?: { proceed?: boolean } } | undefined;
        // Not asked (see ToolContext.ask): the default is not to run what nobody confirmed.
        if (answer === undefined) {
          const text = `Batch not run: its estimated ${cost} tokens exceed the confirmation threshold (${threshold}), and this caller cannot confirm (it declared no elicitation capability, or did not call the tool as a task).`;
          return { content: [{ type: 'text', text }], isError: true };
        }
        if (answer.action !== 'accept' || answer.content?.proceed !== true) {
          return { content: [{ type: 'text', text: 'Batch not run: not confirmed.' }], isError: true };
        }
      }
      const results: { prompt: string; text: string; output_tokens: number }[] = [];
      for (const [i, prompt] of args.prompts.entries()) {
        if (ctx.signal.aborted) throw new ToolFailure('cancelled');
        await ctx.progress(`${i}/${args.prompts.length} prompts done`);
        const out = await ctx.generate({
          model: args.model,
          input: prompt,
          maxOutputTokens: args.max_output_tokens,
        });
        results.push({ prompt, text: out.text, output_tokens: out.usage?.output_tokens ?? 0 });
      }
      await ctx.progress(`${args.prompts.length}/${args.prompts.length} prompts done`);
      return {
        content: [{ type: 'text', text: results.map((r, i) => `${i + 1}. ${r.text}`).join('\n') }],
        structuredContent: { estimated_cost: cost, results },
      };
    },
  });
}
