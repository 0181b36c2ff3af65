/**
 * The OpenAI Responses API parameters a response request may carry besides LMSP's own, so that
 * clients built on the official `openai` SDKs work unchanged. Each is either honoured
 * (`background`), accepted and ignored because it has no effect here (documented in
 * README.md, "OpenAI SDKs"), or accepted only in the value that asks for nothing Taskline
 * cannot do; any other value is `invalid_request` naming the parameter.
 */
import { z } from 'zod';

const refused = (param: string, why: string) => `${param} is not supported by Taskline: ${why}`;

/**
 * OpenAI's `include` values (the SDK's `ResponseIncludable`) asking for data of items no response
 * here has: tool calls (none run), input images (input is text), reasoning (no model here
 * reasons). Honoured: such a response is whole without them, as OpenAI's would be.
 */
const NOTHING_TO_ADD: ReadonlySet<string> = new Set([
  'file_search_call.results',
  'web_search_call.results',
  'web_search_call.action.sources',
  'message.input_image.image_url',
  'computer_call_output.output.image_url',
  'code_interpreter_call.outputs',
  'reasoning.encrypted_content',
]);

/** Known values whose data exists at OpenAI but is never produced here. */
const NOT_PRODUCED: Readonly<Record<string, string>> = {
  'message.output_text.logprobs': 'log probabilities are not returned.',
};

/**
 * `include` on a create, a retrieve and an input items list: honoured values pass, any other is
 * refused whole (OpenAI's `param` is `include`), the first bad value named.
 */
export const Include = z
  .array(z.string())
  .superRefine((values, ctx) => {
    const bad = values.find((value) => !NOTHING_TO_ADD.has(value));
    if (bad === undefined) return;
    const why = Object.hasOwn(NOT_PRODUCED, bad)
      ? refused('include', `"${bad}": ${NOT_PRODUCED[bad]}`)
      : `"${bad}" is not a value OpenAI's Responses API defines for include.`;
    ctx.addIssue({ code: 'custom', message: why });
  })
  .describe(
    `Honoured, with nothing to add (no response here has tool calls, input images or reasoning): ${[...NOTHING_TO_ADD].join(', ')}. Refused (400 invalid_request naming include): ${Object.keys(NOT_PRODUCED).join(', ')} (log probabilities are not returned), and any other value.`,
  );

/** LMSP's optional field (`../lmsp/schema.ts`): absent, or `null`, which counts as absent. */
type Optional = <T extends z.ZodType>(
  schema: T,
) => z.ZodType<z.output<T> | undefined, z.input<T> | null | undefined>;

/** The fields, made optional the way LMSP's own are. */
export function openAiFields(optional: Optional) {
  /** An empty list, or absent: lists of tools or extra outputs are things no model here runs. */
  const emptyList = (param: string, why: string) =>
    optional(z.array(z.unknown()).max(0, refused(param, why)));
  /** Absent (or `null`): a feature that exists only as "off" here. */
  const off = (param: string, why: string) => optional(z.never({ error: refused(param, why) }));
  return {
    /** Honoured: a durable task, answered at once with the queued response. */
    background: optional(z.boolean()),
    /**
     * Accepted: every response is kept as a task for the task retention (its run needs it
     * stored), `false` too, since apps send it by default; `false` with `background` is refused
     * where the request is served, as OpenAI refuses background mode without storage.
     */
    store: optional(
      z
        .boolean()
        .describe(
          'Accepted; every response is kept as a task for the task retention. false with background: true is 400 invalid_request naming store.',
        ),
    ),
    /** Ignored: end-user identifiers for abuse monitoring and prompt caching. */
    user: optional(z.string().max(256)),
    safety_identifier: optional(z.string().max(256)),
    prompt_cache_key: optional(z.string().max(256)),
    /** Ignored: billing and latency tiers have no meaning here. */
    service_tier: optional(z.enum(['auto', 'default', 'flex', 'scale', 'priority'])),
    /** Ignored: no tools run in a response, so there is nothing to run in parallel or to count. */
    parallel_tool_calls: optional(z.boolean()),
    max_tool_calls: optional(z.int().min(0)),
    tools: emptyList('tools', 'responses here cannot call tools (MCP tools run through /mcp).'),
    tool_choice: optional(
      z.enum(['none', 'auto'], { error: refused('tool_choice', 'only "none" or "auto" (without tools).') }),
    ),
    include: optional(Include),
    /** Ignored: the options of a stream's obfuscation padding, which Taskline does not add. */
    stream_options: optional(z.strictObject({ include_obfuscation: optional(z.boolean()) })),
    /** Only plain text output. */
    text: optional(
      z.strictObject({
        format: optional(
          z.strictObject({
            type: z.literal('text', { error: refused('text.format', 'only plain text output ("text").') }),
          }),
        ),
        verbosity: off('text.verbosity', 'the models here have no verbosity control.'),
      }),
    ),
    /** `disabled` (the default): an input longer than the model's context fails; nothing is dropped. */
    truncation: optional(
      z.literal('disabled', { error: refused('truncation', 'only "disabled"; input is never dropped.') }),
    ),
    top_logprobs: optional(
      z.literal(0, { error: refused('top_logprobs', 'log probabilities are not returned.') }),
    ),
    reasoning: off('reasoning', 'the models here do not reason.'),
    previous_response_id: off('previous_response_id', 'send the whole conversation in input instead.'),
    conversation: off('conversation', 'send the whole conversation in input instead.'),
    prompt: off('prompt', 'stored prompt templates do not exist here.'),
  };
}

/** The names of those fields. */
const NAMES = Object.keys(openAiFields((schema) => schema.optional()));

/** What a worker never needs: the stored request keeps only what changes the generation. */
export function withoutOpenAiFields<T extends Record<string, unknown>>(request: T): T {
  const out: Record<string, unknown> = { ...request };
  for (const key of NAMES) delete out[key];
  return out as T;
}
