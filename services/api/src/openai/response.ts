/**
 * The members OpenAI's Responses API has on every response and LMSP's response object leaves
 * out, added where a response is served (`responseObject`, lifecycle events) so that code written
 * to the SDK's `Response` type finds them: no tool ever runs in a response here, and no prompt
 * cache or reasoning counts in its usage. What is stored, and LMSP's own fields, stay as they are.
 */
import type { ResponseObject } from '@taskline/engine';

export function withOpenAiMembers(response: ResponseObject) {
  const usage = response.usage && {
    ...response.usage,
    input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
    output_tokens_details: { reasoning_tokens: 0 },
  };
  return { ...response, usage, tools: [], tool_choice: 'none' as const, parallel_tool_calls: false };
}
