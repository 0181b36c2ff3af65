import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { registerSharedFixtures, text } from './fixtureCatalog.js';
import {
  completable,
  createRequestStateCodec,
  fromJsonSchema,
  inputRequired,
  ResourceTemplate,
  type McpServer,
  type ServerContext,
} from '@modelcontextprotocol/server';

/**
 * The inline fixtures the conformance suite's general `server --requirements 2026-07-28`
 * scenarios call (content types, progress, logging, MRTR input requests, resources, prompts,
 * completion, JSON Schema 2020-12). Each name and result shape is the one the scenario's
 * description prescribes. They run on the replica, like any `taskSupport: 'forbidden'` tool;
 * the durable task fixtures are in `@taskline/tools` (`registerConformanceTools`). Off by default:
 * TASKLINE_MCP_CONFORMANCE_TOOLS=1.
 */

/**
 * MRTR `requestState` comes back from the client, so it is sealed (HMAC). Any replica may receive
 * the next round, so the key is the same everywhere; it is fixed because only fixtures use it.
 */
const codec = createRequestStateCodec<{ tool: string; round: number }>({
  key: createHash('sha256').update('taskline conformance fixtures').digest(),
});
export const fixtureRequestStateVerify = codec.verify;

const noArgs = z.object({});

const elicit = (message: string, field: string) => ({
  method: 'elicitation/create',
  params: {
    message,
    requestedSchema: { type: 'object', properties: { [field]: { type: 'string' } }, required: [field] },
  },
});
const sample = (prompt: string, maxTokens: number) => ({
  method: 'sampling/createMessage',
  params: { messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens },
});
const roots = { method: 'roots/list', params: {} };

const clientCaps = (ctx: ServerContext) =>
  (ctx.mcpReq.envelope?.['io.modelcontextprotocol/clientCapabilities' as never] ?? {}) as Record<
    string,
    unknown
  >;
const answered = (ctx: ServerContext, ...keys: string[]) =>
  keys.every((k) => ctx.mcpReq.inputResponses?.[k] !== undefined);
const ask = async (ctx: ServerContext, tool: string, round: number, requests: Record<string, unknown>) =>
  inputRequired({
    inputRequests: requests as never,
    requestState: await codec.mint({ tool, round }, ctx),
  });
const stateRound = (ctx: ServerContext) =>
  (ctx.mcpReq.requestState<{ round: number }>() as { round?: number } | undefined)?.round ?? 0;

/** Fixture tools that need a client capability: the router answers -32021 for them without it. */
export const FIXTURE_REQUIRED_CAPABILITIES: Record<string, Record<string, object>> = {
  test_missing_capability: { sampling: {} },
};

export function registerConformanceFixtures(server: McpServer): void {
  const tool = (name: string, description: string, run: (ctx: ServerContext) => Promise<unknown> | unknown) =>
    server.registerTool(
      name,
      { description, inputSchema: noArgs },
      async (_args: unknown, ctx: ServerContext) => (await run(ctx)) as never,
    );

  registerSharedFixtures(server, {
    ResourceTemplate,
    completable,
    promptArgs: (shape: Record<string, unknown>) => z.object(shape as z.ZodRawShape),
  } as never);
  tool('test_tool_with_progress', 'Reports progress 0, 50, 100 of 100.', async (ctx) => {
    const token = (ctx.mcpReq as { _meta?: { progressToken?: string | number } })._meta?.progressToken;
    for (const progress of [0, 50, 100]) {
      if (token !== undefined) {
        await ctx.mcpReq.notify({
          method: 'notifications/progress',
          params: { progressToken: token, progress, total: 100 },
        });
      }
      if (progress < 100) await sleep(50);
    }
    return text('Tool with progress executed.');
  });
  tool('test_logging_tool', 'Logs at info (sent only when the request set a log level).', async (ctx) => {
    await ctx.mcpReq.log('info', 'Tool execution started');
    return text('Logging tool executed.');
  });
  // Refused with -32021 by the router before the SDK sees it (FIXTURE_REQUIRED_CAPABILITIES).
  tool('test_missing_capability', 'Needs the client sampling capability.', (ctx) =>
    ask(ctx, 'test_missing_capability', 1, { completion: sample('Say hello', 20) }),
  );
  tool('test_streaming_elicitation', 'Asks for a name through an input-required result.', async (ctx) =>
    answered(ctx, 'user_name')
      ? text('Thanks.')
      : ask(ctx, 'test_streaming_elicitation', 1, { user_name: elicit('What is your name?', 'name') }),
  );

  // SEP-2322 (MRTR) inline input requests.
  tool('test_input_required_result_elicitation', 'MRTR: one elicitation.', (ctx) =>
    answered(ctx, 'user_name')
      ? text(`Hello, ${JSON.stringify(ctx.mcpReq.inputResponses?.user_name)}!`)
      : ask(ctx, 'elicitation', 1, { user_name: elicit('What is your name?', 'name') }),
  );
  tool('test_input_required_result_sampling', 'MRTR: one sampling request.', (ctx) =>
    answered(ctx, 'completion')
      ? text(`Sampled: ${JSON.stringify(ctx.mcpReq.inputResponses?.completion)}`)
      : ask(ctx, 'sampling', 1, { completion: sample('What is the capital of France?', 100) }),
  );
  tool('test_input_required_result_list_roots', 'MRTR: the client roots.', (ctx) =>
    answered(ctx, 'client_roots')
      ? text(`Roots: ${JSON.stringify(ctx.mcpReq.inputResponses?.client_roots)}`)
      : ask(ctx, 'roots', 1, { client_roots: roots }),
  );
  tool('test_input_required_result_request_state', 'MRTR: a sealed requestState round trip.', (ctx) =>
    answered(ctx, 'confirm') && stateRound(ctx) === 1
      ? text('state-ok: requestState validated')
      : ask(ctx, 'request_state', 1, { confirm: elicit('Please confirm', 'ok') }),
  );
  tool('test_input_required_result_tampered_state', 'MRTR: rejects a tampered requestState.', (ctx) =>
    answered(ctx, 'confirm') && stateRound(ctx) === 1
      ? text('state-ok')
      : ask(ctx, 'tampered_state', 1, { confirm: elicit('Please confirm', 'ok') }),
  );
  tool('test_input_required_result_multiple_inputs', 'MRTR: elicitation, sampling and roots.', (ctx) =>
    answered(ctx, 'user_name', 'greeting', 'client_roots')
      ? text('All inputs received.')
      : ask(ctx, 'multiple', 1, {
          user_name: elicit('What is your name?', 'name'),
          greeting: sample('Generate a greeting', 50),
          client_roots: roots,
        }),
  );
  tool('test_input_required_result_multi_round', 'MRTR: two rounds with an evolving state.', (ctx) => {
    const round = stateRound(ctx);
    if (round === 2 && answered(ctx, 'step2')) return text('Multi-round complete.');
    if (round >= 1 && answered(ctx, 'step1'))
      return ask(ctx, 'multi_round', 2, { step2: elicit('Step 2: What is your favorite color?', 'color') });
    return ask(ctx, 'multi_round', 1, { step1: elicit('Step 1: What is your name?', 'name') });
  });
  tool('test_input_required_result_capabilities', 'MRTR: asks only for declared capabilities.', (ctx) => {
    const caps = clientCaps(ctx);
    const requests: Record<string, unknown> = {};
    if (caps.elicitation) requests.user_name = elicit('What is your name?', 'name');
    if (caps.sampling) requests.completion = sample('Say hello', 20);
    if (caps.roots) requests.client_roots = roots;
    if (Object.keys(requests).length === 0 || answered(ctx, ...Object.keys(requests)))
      return text('Nothing more to ask.');
    return ask(ctx, 'capabilities', 1, requests);
  });

  // SEP-1613/SEP-2106: the schema is listed verbatim.
  server.registerTool(
    'json_schema_2020_12_tool',
    {
      description: 'Tool with JSON Schema 2020-12 features',
      inputSchema: fromJsonSchema({
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        type: 'object',
        $defs: {
          address: {
            $anchor: 'addressDef',
            type: 'object',
            properties: { street: { type: 'string' }, city: { type: 'string' } },
          },
        },
        properties: {
          name: { type: 'string' },
          address: { $ref: '#/$defs/address' },
          contactMethod: { type: 'string', enum: ['phone', 'email'] },
          phone: { type: 'string' },
          email: { type: 'string' },
        },
        allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
        if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
        then: { required: ['phone'] },
        else: { required: ['email'] },
        additionalProperties: false,
      } as never),
    },
    async () => text('ok'),
  );

  // SEP-2243: `region` is mirrored into the Mcp-Param-Region header, which the SDK checks.
  server.registerTool(
    'test_custom_header',
    {
      description: 'Echoes a region that travels in the Mcp-Param-Region header too.',
      inputSchema: fromJsonSchema({
        type: 'object',
        properties: { region: { type: 'string', 'x-mcp-header': 'Region' } },
        required: ['region'],
      } as never),
    },
    async (args: unknown) => text(`Region: ${(args as { region: string }).region}`),
  );

  server.registerPrompt(
    'test_input_required_result_prompt',
    { description: 'MRTR on prompts/get: asks for context first.' },
    async (ctx: ServerContext) =>
      (answered(ctx, 'user_context')
        ? { messages: [{ role: 'user', content: { type: 'text', text: 'Use the context given.' } }] }
        : inputRequired({
            inputRequests: {
              user_context: elicit('What context should the prompt use?', 'context') as never,
            },
          })) as never,
  );
}
