import { z } from 'zod';

/**
 * The conformance fixtures both protocol eras list the same way: content blocks, an error
 * result, resources and prompts, with the names and results the suite's scenario descriptions
 * prescribe. The SDK v2 server (2026-07-28) and the SDK v1 server (2025-era sessions) register
 * them alike; each passes its own `ResourceTemplate` and `completable`.
 */

// A 1x1 PNG and a silent WAV: the scenarios check only the block shape and MIME type.
export const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const WAV = 'UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=';

export const text = (t: string) => ({ content: [{ type: 'text' as const, text: t }] });
const noArgs = z.object({});

/** The registration methods both SDKs' `McpServer` share, loosely typed across the two. */
export interface FixtureHost {
  registerTool(name: string, config: never, cb: never): unknown;
  registerResource(name: string, uri: never, metadata: never, cb: never): unknown;
  registerPrompt(name: string, config: never, cb: never): unknown;
}

export interface FixtureSdk {
  ResourceTemplate: new (template: string, callbacks: { list: undefined }) => unknown;
  completable: (schema: z.ZodString, complete: (value: string) => string[]) => unknown;
  /** A prompt's `argsSchema` from its fields' shape. */
  promptArgs: (shape: Record<string, unknown>) => unknown;
}

export function registerSharedFixtures(host: FixtureHost, sdk: FixtureSdk): void {
  const server = host as unknown as {
    registerTool(name: string, config: object, cb: (...args: never[]) => unknown): unknown;
    registerResource(
      name: string,
      uri: unknown,
      metadata: object,
      cb: (...args: never[]) => unknown,
    ): unknown;
    registerPrompt(name: string, config: object, cb: (...args: never[]) => unknown): unknown;
  };
  const { ResourceTemplate, completable, promptArgs } = sdk;
  const tool = (name: string, description: string, run: () => unknown) =>
    server.registerTool(name, { description, inputSchema: noArgs }, async () => run());

  tool('test_simple_text', 'Returns one text block.', () =>
    text('This is a simple text response for testing.'),
  );
  tool('test_image_content', 'Returns one image block.', () => ({
    content: [{ type: 'image', data: PNG, mimeType: 'image/png' }],
  }));
  tool('test_audio_content', 'Returns one audio block.', () => ({
    content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }],
  }));
  tool('test_embedded_resource', 'Returns one embedded resource.', () => ({
    content: [
      {
        type: 'resource',
        resource: {
          uri: 'test://embedded-resource',
          mimeType: 'text/plain',
          text: 'This is an embedded resource content.',
        },
      },
    ],
  }));
  tool('test_multiple_content_types', 'Returns text, image and resource blocks.', () => ({
    content: [
      { type: 'text', text: 'Multiple content types test:' },
      { type: 'image', data: PNG, mimeType: 'image/png' },
      {
        type: 'resource',
        resource: {
          uri: 'test://mixed-content-resource',
          mimeType: 'application/json',
          text: JSON.stringify({ test: 'data', value: 123 }),
        },
      },
    ],
  }));
  tool('test_error_handling', 'Always reports a tool error.', () => ({
    ...text('This tool intentionally returns an error for testing'),
    isError: true,
  }));
  server.registerResource(
    'static-text',
    'test://static-text',
    { description: 'A static text resource.', mimeType: 'text/plain' },
    async (uri: URL) => ({
      contents: [
        { uri: uri.href, mimeType: 'text/plain', text: 'This is the content of the static text resource.' },
      ],
    }),
  );
  server.registerResource(
    'static-binary',
    'test://static-binary',
    { description: 'A static binary resource.', mimeType: 'image/png' },
    async (uri: URL) => ({ contents: [{ uri: uri.href, mimeType: 'image/png', blob: PNG }] }),
  );
  server.registerResource(
    'template',
    new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { description: 'A resource template.', mimeType: 'application/json' },
    async (uri: URL, vars: Record<string, string | string[]>) => ({
      contents: [
        {
          uri: uri.href,
          mimeType: 'application/json',
          text: JSON.stringify({ id: vars.id, templateTest: true, data: `Data for ID: ${String(vars.id)}` }),
        },
      ],
    }),
  );

  const user = (content: unknown) => ({ role: 'user' as const, content: content as never });
  server.registerPrompt('test_simple_prompt', { description: 'A prompt without arguments.' }, () => ({
    messages: [user({ type: 'text', text: 'This is a simple prompt for testing.' })],
  }));
  server.registerPrompt(
    'test_prompt_with_arguments',
    {
      description: 'A prompt with two arguments.',
      argsSchema: promptArgs({
        arg1: completable(z.string().describe('First test argument'), (value: string) =>
          ['paris', 'park', 'party'].filter((v) => v.startsWith(value)),
        ),
        arg2: z.string().describe('Second test argument'),
      }),
    },
    ({ arg1, arg2 }: { arg1: string; arg2: string }) => ({
      messages: [user({ type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` })],
    }),
  );
  server.registerPrompt(
    'test_prompt_with_embedded_resource',
    {
      description: 'A prompt that embeds a resource.',
      argsSchema: promptArgs({ resourceUri: z.string().describe('URI of the resource to embed') }),
    },
    ({ resourceUri }: { resourceUri: string }) => ({
      messages: [
        user({
          type: 'resource',
          resource: {
            uri: resourceUri,
            mimeType: 'text/plain',
            text: 'Embedded resource content for testing.',
          },
        }),
        user({ type: 'text', text: 'Please process the embedded resource above.' }),
      ],
    }),
  );
  server.registerPrompt('test_prompt_with_image', { description: 'A prompt with an image.' }, () => ({
    messages: [
      user({ type: 'image', data: PNG, mimeType: 'image/png' }),
      user({ type: 'text', text: 'Please analyze the image above.' }),
    ],
  }));
}
