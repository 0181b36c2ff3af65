// The `generate` tool: one LMSP response on a model, run as a task.
import { z } from 'zod';
import { defineTool } from '@taskline/tool-sdk';
import { checkGeneration, modelField, type ModelChoice } from './api.js';

/**
 * `generate`: one LMSP response on a model, run as a task; its text, with usage as structured
 * output. `models` lists the served models for the schema (see `modelField`).
 */
export const generateTool = (models?: ModelChoice) =>
  defineTool({
    name: 'generate',
    description: 'Generates text with a model. Runs as a durable task; returns the text and token usage.',
    taskSupport: 'optional',
    // A new attempt replays the steps: each generation is a child task created idempotently, never run twice.
    onRestart: 'retry',
    inputSchema: z.object({
      model: modelField(models),
      input: z.string().min(1).describe('The prompt: the text the model continues or answers.'),
      max_output_tokens: z
        .number()
        .int()
        .positive()
        .optional()
        .describe("Most tokens to generate; defaults to, and may not exceed, the deployment's cap."),
      temperature: z
        .number()
        .min(0)
        .max(2)
        .optional()
        .describe(
          'Sampling temperature, 0 (deterministic) to 2 (most varied); the model default when absent.',
        ),
    }),
    prepare(args, _responses, served) {
      checkGeneration(served, args.model, args.max_output_tokens);
      return { args };
    },
    async run(args, ctx) {
      const out = await ctx.generate({
        model: args.model,
        input: args.input,
        maxOutputTokens: args.max_output_tokens,
        temperature: args.temperature,
      });
      return {
        content: [{ type: 'text', text: out.text }],
        structuredContent: { status: out.status, usage: out.usage },
      };
    },
  });
