import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { completable } from '@modelcontextprotocol/sdk/server/completable.js';
import { ResourceTemplate, type McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import {
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  type ServerNotification,
  type ServerRequest,
} from '@modelcontextprotocol/sdk/types.js';
import { registerSharedFixtures, text, type FixtureHost, type FixtureSdk } from '../fixtureCatalog.js';

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;
/** A server request during a call goes out on that call's SSE stream (there is no standalone stream). */
const onStream = (extra: Extra) => ({ relatedRequestId: extra.requestId });

/**
 * The conformance fixtures of the 2025-11-25 server scenarios (`server --requirements
 * 2025-11-25`) beside the shared ones: logging and progress notifications on the call's stream,
 * sampling and elicitation as server requests during the call (their answers come back through
 * the Redis relay, on any replica), and resource subscriptions. Names, arguments and results are
 * the ones the scenario descriptions prescribe. Off by default: TASKLINE_MCP_CONFORMANCE_TOOLS=1.
 */
export function registerLegacyFixtures(server: McpServer): void {
  registerSharedFixtures(
    server as unknown as FixtureHost,
    {
      ResourceTemplate,
      completable,
      // SDK v1 takes a prompt's arguments as a raw shape.
      promptArgs: (shape: Record<string, unknown>) => shape,
    } as unknown as FixtureSdk,
  );
  const noArgs = z.object({});
  const tool = (
    name: string,
    description: string,
    inputSchema: z.ZodObject,
    run: (args: Record<string, unknown>, extra: Extra) => Promise<unknown>,
  ) =>
    server.registerTool(name, { description, inputSchema }, (async (
      args: Record<string, unknown>,
      extra: Extra,
    ) => run(args, extra)) as never);

  tool('test_tool_with_logging', 'Logs three info messages while it runs.', noArgs, async (_args, extra) => {
    for (const [i, data] of [
      'Tool execution started',
      'Tool processing data',
      'Tool execution completed',
    ].entries()) {
      if (i > 0) await sleep(50);
      await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data } });
    }
    return text('Logging tool executed.');
  });
  tool('test_tool_with_progress', 'Reports progress 0, 50, 100 of 100.', noArgs, async (_args, extra) => {
    const token = extra._meta?.progressToken;
    for (const progress of [0, 50, 100]) {
      if (token !== undefined) {
        await extra.sendNotification({
          method: 'notifications/progress',
          params: { progressToken: token, progress, total: 100 },
        });
      }
      if (progress < 100) await sleep(50);
    }
    return text('Tool with progress executed.');
  });
  tool(
    'test_sampling',
    'Asks the client to sample a completion.',
    z.object({ prompt: z.string() }),
    async (args, extra) => {
      const answer = await server.server.createMessage(
        {
          messages: [{ role: 'user', content: { type: 'text', text: String(args.prompt) } }],
          maxTokens: 100,
        },
        onStream(extra),
      );
      const content = answer.content as { type?: string; text?: string };
      return text(`LLM response: ${content.type === 'text' ? content.text : JSON.stringify(content)}`);
    },
  );
  tool(
    'test_elicitation',
    'Asks the user for a name and an email.',
    z.object({ message: z.string() }),
    async (args, extra) => {
      const answer = await server.server.elicitInput(
        {
          message: String(args.message),
          requestedSchema: {
            type: 'object',
            properties: {
              username: { type: 'string', description: "User's response" },
              email: { type: 'string', description: "User's email address" },
            },
            required: ['username', 'email'],
          },
        },
        onStream(extra),
      );
      return text(`User response: ${JSON.stringify(answer)}`);
    },
  );
  const elicited = async (extra: Extra, requestedSchema: object) => {
    const answer = await server.server.elicitInput(
      { message: 'Please review the fields.', requestedSchema } as never,
      onStream(extra),
    );
    return text(
      `Elicitation completed: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`,
    );
  };
  tool('test_elicitation_sep1034_defaults', 'Elicitation with defaults (SEP-1034).', noArgs, (_args, extra) =>
    elicited(extra, {
      type: 'object',
      properties: {
        name: { type: 'string', default: 'John Doe' },
        age: { type: 'integer', default: 30 },
        score: { type: 'number', default: 95.5 },
        status: { type: 'string', enum: ['active', 'inactive', 'pending'], default: 'active' },
        verified: { type: 'boolean', default: true },
      },
    }),
  );
  tool(
    'test_elicitation_sep1330_enums',
    'Elicitation with the five enum forms (SEP-1330).',
    noArgs,
    (_args, extra) =>
      elicited(extra, {
        type: 'object',
        properties: {
          untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
          titledSingle: {
            type: 'string',
            oneOf: [
              { const: 'value1', title: 'First Option' },
              { const: 'value2', title: 'Second Option' },
              { const: 'value3', title: 'Third Option' },
            ],
          },
          legacyEnum: {
            type: 'string',
            enum: ['opt1', 'opt2', 'opt3'],
            enumNames: ['Option One', 'Option Two', 'Option Three'],
          },
          untitledMulti: {
            type: 'array',
            items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
          },
          titledMulti: {
            type: 'array',
            items: {
              anyOf: [
                { const: 'value1', title: 'First Choice' },
                { const: 'value2', title: 'Second Choice' },
                { const: 'value3', title: 'Third Choice' },
              ],
            },
          },
        },
      }),
  );
  // Nothing here changes, so a subscription only needs acknowledging.
  server.server.setRequestHandler(SubscribeRequestSchema, async () => ({}));
  server.server.setRequestHandler(UnsubscribeRequestSchema, async () => ({}));
}
