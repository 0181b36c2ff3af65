/**
 * OpenAI's `GET /responses/{id}/input_items` (`responses.inputItems.list` in the SDKs): the input
 * of the request a response's task runs, as stored on the task, one message item per input
 * message (a string input is one user message), in OpenAI's cursor pages. Item ids are the
 * item's place in the input (`msg_<x>_<n>` for `resp_<x>`), so a cursor names the same item on
 * every read and every replica; ids a client sent on its items are not kept by the engine.
 */
import { z } from 'zod';
import { TasklineError, type TaskRecord } from '@taskline/engine';
import { parseBody } from '../lmsp/schema.js';

type Part = { type: 'input_text' | 'output_text'; text: string; annotations?: unknown[] };
type Message = { role: string; content: string | Part[] };

/** OpenAI's page parameters and defaults (newest first, 20 a page, at most 100). */
const ListQuery = z.object({
  after: z.string().min(1).max(256).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20),
  order: z.enum(['asc', 'desc']).default('desc'),
});

/** The response's input items as OpenAI's `ResponseItem`s, in input order. */
function inputItems(task: TaskRecord) {
  const { input } = task.request as { input: string | Message[] };
  const messages: Message[] = typeof input === 'string' ? [{ role: 'user', content: input }] : input;
  const prefix = `msg_${task.responseId.slice('resp_'.length)}_`;
  return messages.map((message, i) => {
    const parts: Part[] =
      typeof message.content === 'string'
        ? [{ type: message.role === 'assistant' ? 'output_text' : 'input_text', text: message.content }]
        : message.content;
    return {
      id: `${prefix}${i}`,
      type: 'message' as const,
      role: message.role,
      status: 'completed' as const,
      content: parts.map(({ type, text, annotations }) =>
        type === 'output_text' ? { type, text, annotations: annotations ?? [] } : { type, text },
      ),
    };
  });
}

/** One page of a response's input items, from the request's `after`, `limit` and `order`. */
export function inputItemPage(task: TaskRecord, query: Record<string, unknown>) {
  const { after, limit, order } = parseBody(ListQuery, query);
  const items = inputItems(task);
  if (order === 'desc') items.reverse();
  const start = after === undefined ? 0 : items.findIndex((item) => item.id === after) + 1;
  if (start === 0 && after !== undefined)
    throw new TasklineError('invalid_request', `after: ${after} is not an input item of this response.`, {
      param: 'after',
    });
  const data = items.slice(start, start + limit);
  return {
    object: 'list' as const,
    data,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
    has_more: start + limit < items.length,
  };
}
