import { z } from 'zod';
import { checkGeneration, defineTool } from './api.js';

/** `generate`: one LMSP response on a model, run as a task; its text, with usage as structured output. */
export const generateTool = defineTool({
  name: 'generate',
  description: 'Generates text with a model. Runs as a durable task; returns the text and token usage.',
  taskSupport: 'required',
  inputSchema: z.object({
    model: z.string().min(1),
    input: z.string().min(1),
    max_output_tokens: z.number().int().positive().optional(),
    temperature: z.number().min(0).max(2).optional(),
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
