import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { defineTool, ToolFailure, ToolRegistry, type InputRequest } from './api.js';

/**
 * The fixtures the MCP conformance suite's `tasks-*` scenarios call (their descriptions in
 * `@modelcontextprotocol/conformance` list them). Off by default: TASKLINE_MCP_CONFORMANCE_TOOLS=1.
 */
const elicit = (message: string, field: string): InputRequest => ({
  method: 'elicitation/create',
  params: {
    mode: 'form',
    message,
    requestedSchema: { type: 'object', properties: { [field]: { type: 'string' } }, required: [field] },
  },
});

export function registerConformanceTools(registry: ToolRegistry): ToolRegistry {
  return registry
    .register(
      defineTool({
        name: 'greet',
        description: 'Greets by name (synchronous).',
        taskSupport: 'forbidden',
        inputSchema: z.object({ name: z.string().default('world') }),
        async run(args) {
          return { content: [{ type: 'text', text: `Hello, ${args.name}!` }] };
        },
      }),
    )
    .register(
      defineTool({
        name: 'slow_compute',
        description: 'Sleeps `seconds` seconds, then answers; ends cancelled when cancelled meanwhile.',
        taskSupport: 'optional',
        inputSchema: z.object({ seconds: z.number().min(0).max(600).default(1) }),
        async run(args, ctx) {
          await sleep(args.seconds * 1000, undefined, { signal: ctx.signal });
          return { content: [{ type: 'text', text: `Computed after ${args.seconds} seconds` }] };
        },
      }),
    )
    .register(
      defineTool({
        name: 'failing_job',
        description: 'Reports a tool execution error after about a second.',
        taskSupport: 'required',
        inputSchema: z.object({}),
        async run(_args, ctx) {
          await sleep(1000, undefined, { signal: ctx.signal });
          return { content: [{ type: 'text', text: 'The job failed.' }], isError: true };
        },
      }),
    )
    .register(
      defineTool({
        name: 'protocol_error_job',
        description: 'Fails with a protocol error.',
        taskSupport: 'required',
        inputSchema: z.object({}),
        async run() {
          throw new ToolFailure('protocol_error_job always fails');
        },
      }),
    )
    .register(
      defineTool({
        name: 'confirm_delete',
        description: 'Asks for confirmation, then completes.',
        taskSupport: 'required',
        inputSchema: z.object({ path: z.string().default('/tmp/example') }),
        async run(args, ctx) {
          const answers = await ctx.ask({ confirm: elicit(`Delete ${args.path}?`, 'confirm') });
          return {
            content: [{ type: 'text', text: `Delete of ${args.path}: ${JSON.stringify(answers.confirm)}` }],
          };
        },
      }),
    )
    .register(
      defineTool({
        name: 'multi_input',
        description: 'Asks two questions at once, then completes.',
        taskSupport: 'required',
        inputSchema: z.object({}),
        async run(_args, ctx) {
          const answers = await ctx.ask({
            first: elicit('First?', 'value'),
            second: elicit('Second?', 'value'),
          });
          return { content: [{ type: 'text', text: `Answers: ${JSON.stringify(answers)}` }] };
        },
      }),
    )
    .register(
      defineTool({
        name: 'test_tool_with_task',
        description: 'Asks for a user name inline (MRTR), then runs as a task that greets it.',
        taskSupport: 'required',
        inputSchema: z.object({ user_name: z.string().optional() }),
        prepare(args, responses) {
          const answer = responses.user_name as
            { action?: string; content?: Record<string, unknown> } | undefined;
          if (!answer) return { ask: { user_name: elicit('What is your name?', 'name') } };
          const content = answer.content ?? {};
          const name = Object.values(content).find((v) => typeof v === 'string') ?? JSON.stringify(content);
          return { args: { user_name: String(name) } };
        },
        async run(args) {
          return { content: [{ type: 'text', text: `Hello, ${args.user_name ?? 'unknown'}!` }] };
        },
      }),
    );
}
