/**
 * LMSP 1.0 in one place: request validation and the task and response objects clients see.
 * It follows LMSP 1.0 section 7 and Taskline's reading of the sections it refers to (docs/lmsp.md);
 * where the specification's full text differs, this module and `openapi.ts` are what change.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { MAX_NESTING, nestedDeeperThan } from '@taskline/admission';
import {
  emptyResponse,
  outputTokens,
  problem,
  TasklineError,
  type ModelInfo,
  type ResponseObject,
  type ResponseStatus,
  type ServedModels,
  type TaskRecord,
  type TaskStatus,
} from '@taskline/engine';
import { openAiPath } from '../openai/errors.js';
import { openAiFields, withoutOpenAiFields } from '../openai/params.js';
import { withOpenAiMembers } from '../openai/response.js';

export const API_PREFIX = '/lmsp/v1';
export const LMSP_VERSION = '1.0';

const text = z.string().max(1_000_000);

// `annotations`, `logprobs`, an item's `id` and `status`: what an output item carries when a
// client sends a previous response's output back as input (OpenAI SDKs do); they are ignored.
const ContentPart = z.strictObject({
  type: z.enum(['input_text', 'output_text']),
  text,
  annotations: z.array(z.unknown()).optional(),
  logprobs: z.array(z.unknown()).optional(),
});

/** A message; `type` may be left out, as the OpenAI Responses API allows (`{ role, content }`). */
const MessageItem = z.strictObject({
  type: z.literal('message').optional(),
  id: z.string().max(256).optional(),
  status: z.string().max(64).optional(),
  role: z.enum(['user', 'assistant', 'system', 'developer']),
  content: z.union([text, z.array(ContentPart).min(1).max(256)]),
});

/** OpenAI's bound on a request's metadata; every response repeats it, so it stays small. */
const MAX_METADATA_PAIRS = 16;

/**
 * Request metadata: at most 16 string values under short keys. Zod's records skip a key named
 * `__proto__` (storing it would replace an object's prototype) without checking it, so such a key
 * is refused here rather than dropped behind the caller's back. The JSON Schema is the record's.
 */
const Metadata = z.preprocess(
  (value, ctx) => {
    if (typeof value !== 'object' || value === null) return value;
    if (Object.hasOwn(value, '__proto__'))
      ctx.addIssue({
        code: 'custom',
        message: 'A metadata key cannot be named __proto__.',
        path: ['__proto__'],
        input: value,
      });
    if (Object.keys(value).length > MAX_METADATA_PAIRS)
      ctx.addIssue({
        code: 'custom',
        message: `At most ${MAX_METADATA_PAIRS} metadata pairs.`,
        input: value,
      });
    return value;
  },
  z
    .record(z.string().min(1).max(64), z.string().max(512))
    .describe(`At most ${MAX_METADATA_PAIRS} pairs; every response repeats them.`),
);

/** An optional field: absent, or sent as `null`, which counts as absent (LMSP 1.0 section 7.1). */
const optional = <T extends z.ZodType>(schema: T) => schema.nullish().transform((v) => v ?? undefined);

/**
 * A response request (LMSP 1.0 section 6): the body of `POST /responses` and a task's `input`, with
 * the OpenAI Responses API parameters LMSP does not forbid (`../openai/params.ts`).
 */
export const ResponseRequest = z.strictObject({
  model: z.string().min(1).max(256),
  input: z.union([text, z.array(MessageItem).min(1).max(1024)]),
  instructions: optional(text),
  max_output_tokens: optional(z.int().min(1)),
  temperature: optional(z.number().min(0).max(2)),
  top_p: optional(z.number().gt(0).max(1)),
  seed: optional(z.int().min(0).max(Number.MAX_SAFE_INTEGER)),
  metadata: optional(Metadata),
  stream: optional(z.boolean()),
  ...openAiFields(optional),
});
export type ResponseRequest = z.infer<typeof ResponseRequest>;

/**
 * LMSP 1.0 section 7.1 task envelope. A task's `input.stream` "is ignored": accepted whatever its
 * value (a task always has its event stream), never checked, never stored.
 */
export const CreateTaskRequest = z.strictObject({
  type: z.literal('response'),
  input: ResponseRequest.extend({
    stream: z.unknown().describe('Ignored: a task always streams its events.').optional(),
  }),
  on_restart: optional(z.enum(['fail', 'retry', 'resume'])),
});
export type CreateTaskRequest = z.infer<typeof CreateTaskRequest>;

/** `invalid_request` for one top-level field, worded as `parseBody` words its refusals. */
export function fieldError(param: string, message: string): TasklineError {
  return new TasklineError('invalid_request', `${param}: ${message}`, {
    errors: [{ path: param, message }],
    param,
    openai_param: param,
  });
}

/** Parses a body or throws `invalid_request` naming every bad field. */
export function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  if (body === undefined)
    throw new TasklineError(
      'invalid_request',
      'The request needs a JSON body (Content-Type: application/json).',
    );
  if (nestedDeeperThan(body))
    throw new TasklineError('invalid_request', `The body is nested deeper than ${MAX_NESTING} levels.`);
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.flatMap((i) => leafIssues(i, []));
  const errors = issues.map((i) => ({ path: i.path.map(String).join('.') || '(body)', message: i.message }));
  const detail = errors.map((e) => `${e.path}: ${e.message}`).join('; ');
  // The parameter to name (OpenAI's `param`): the first bad field, an unknown key itself.
  const first = issues[0]!;
  const path = [...first.path, ...(first.code === 'unrecognized_keys' ? first.keys.slice(0, 1) : [])];
  const param = path.map(String).join('.');
  throw new TasklineError('invalid_request', detail, {
    errors,
    ...(param ? { param, openai_param: openAiPath(path) } : {}),
  });
}

/**
 * A failed union (`input`: a string or a list of items) as what is wrong inside the value: the
 * issues of the alternative that got furthest into it, rather than "Invalid input" at the top.
 */
function leafIssues(issue: z.core.$ZodIssue, prefix: PropertyKey[]): z.core.$ZodIssue[] {
  const path = [...prefix, ...issue.path];
  if (issue.code === 'invalid_union' && issue.errors.length > 0) {
    const depth = (branch: z.core.$ZodIssue[]) => Math.max(0, ...branch.map((i) => i.path.length));
    const branches = issue.errors.map((branch) => branch.flatMap((i) => leafIssues(i, path)));
    const best = branches.reduce((x, y) => (depth(y) > depth(x) ? y : x));
    if (best.length > 0) return best;
  }
  return [{ ...issue, path }];
}

/** The request a worker runs, as stored on the task (`stream` is the HTTP layer's business only). */
export function storedRequest(
  req: Omit<ResponseRequest, 'stream'> & { stream?: unknown },
  served: ServedModels,
): Omit<ResponseRequest, 'stream'> {
  const { stream: _stream, ...rest } = withoutOpenAiFields(req);
  return { ...rest, max_output_tokens: outputTokens(served, rest.max_output_tokens) };
}

/** `Idempotency-Key`: 1-255 visible ASCII characters (LMSP 1.0 section 9.2). */
export function idempotencyKeyOf(header: string | string[] | undefined): string | null {
  if (header === undefined) return null;
  if (typeof header !== 'string' || !/^[\x21-\x7e]{1,255}$/.test(header)) {
    throw new TasklineError('invalid_request', 'Idempotency-Key must be 1-255 visible ASCII characters.');
  }
  return header;
}

/**
 * The idempotency fingerprint: sha256 of the canonical JSON of the parsed body (keys sorted at
 * every level, a field sent as null counted as absent, as LMSP 7.1 reads it), prefixed by the
 * operation, so one key reused on another endpoint is `idempotency_key_reused`.
 */
export function fingerprint(operation: string, body: unknown): string {
  return createHash('sha256')
    .update(`${operation}\n${canonicalJson(body)}`)
    .digest('hex');
}

export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    // An absent field and one sent as null (parsed to undefined) print the same.
    const entries = Object.keys(value)
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value);
}

/** Where a resumed stream starts: `Last-Event-ID` wins over `?starting_after=`; 0 is the beginning. */
export function resumePoint(lastEventId: string | string[] | undefined, startingAfter: unknown): number {
  const raw = lastEventId ?? startingAfter;
  if (raw === undefined) return 0;
  if (typeof raw !== 'string' || !/^(0|[1-9][0-9]{0,14})$/.test(raw)) {
    throw new TasklineError(
      'invalid_request',
      'Last-Event-ID and starting_after take a sequence number (a non-negative integer).',
    );
  }
  return Number(raw);
}

export type LmspTaskStatus = Exclude<TaskStatus, 'input_required'>;

/** LMSP tasks never enter `input_required` (MCP tool tasks only); shown as `running` if one ever did. */
export const lmspStatus = (s: TaskStatus): LmspTaskStatus => (s === 'input_required' ? 'running' : s);

const seconds = (ms: number) => Math.floor(ms / 1000);

const RESPONSE_STATUS: Record<TaskStatus, ResponseStatus> = {
  queued: 'queued',
  loading: 'in_progress',
  running: 'in_progress',
  input_required: 'in_progress',
  cancelling: 'in_progress',
  succeeded: 'completed',
  failed: 'failed',
  cancelled: 'cancelled',
};

/** The response a task stands for: what the worker stored, or an empty one for its current state (with OpenAI's members). */
export function responseObject(task: TaskRecord) {
  const stored = task.result as ResponseObject | null;
  if (stored && typeof stored === 'object' && stored.object === 'response') return withOpenAiMembers(stored);
  const base = emptyResponse(task, RESPONSE_STATUS[task.shownStatus]);
  return withOpenAiMembers(task.status === 'failed' ? { ...base, error: task.error } : base);
}

export const eventsUrl = (id: string) => `${API_PREFIX}/tasks/${id}/events`;

/** LMSP 7.1 task object, with the status clients see (a new attempt never steps it back). */
export function taskObject(task: TaskRecord) {
  const status = lmspStatus(task.shownStatus);
  return {
    id: task.id,
    object: 'task' as const,
    type: 'response' as const,
    status,
    created_at: seconds(task.createdAt),
    updated_at: seconds(task.updatedAt),
    response_id: task.responseId,
    events_url: eventsUrl(task.id),
    on_restart: task.onRestart,
    response: status === 'succeeded' ? responseObject(task) : null,
    error:
      status === 'failed'
        ? (task.error ?? problem('internal_error', 'The task failed without an error record.'))
        : null,
  };
}

export function modelObject(model: ModelInfo) {
  return {
    id: model.id,
    object: 'model' as const,
    owned_by: 'taskline',
    capabilities: { snapshot: model.canSnapshot },
  };
}
