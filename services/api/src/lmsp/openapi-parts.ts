/**
 * The building blocks of the OpenAPI document (`openapi.ts`): shared responses and the
 * `components` section, whose request schemas come from the zod schemas that validate them.
 */
import { z } from 'zod';
import {
  ERROR_CODES,
  FINAL_EVENT_TYPES,
  ON_RESTART_POLICIES,
  REDIS_UNAVAILABLE_REASONS,
  RESTART_EVENT_TYPE,
  TASK_STATUSES,
} from '@taskline/engine';
import { Include } from '../openai/params.js';
import { CreateTaskRequest, ResponseRequest } from './schema.js';
import { CreateWebhookRequest, RedeliverRequest, UpdateWebhookRequest } from './webhooks.js';

export type Schema = Record<string, unknown>;
export const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
export const nullable = (schema: Schema) => ({ oneOf: [schema, { type: 'null' }] });
export const obj = (properties: Record<string, Schema>, required = Object.keys(properties)) => ({
  type: 'object',
  properties,
  required,
});

function requestSchemas(): Record<string, Schema> {
  const registry = z.registry<{ id: string }>();
  registry.add(ResponseRequest, { id: 'ResponseRequest' });
  registry.add(CreateTaskRequest, { id: 'CreateTaskRequest' });
  registry.add(CreateWebhookRequest, { id: 'CreateWebhookRequest' });
  registry.add(UpdateWebhookRequest, { id: 'UpdateWebhookRequest' });
  registry.add(RedeliverRequest, { id: 'RedeliverRequest' });
  const out = z.toJSONSchema(registry, {
    target: 'draft-2020-12',
    io: 'input',
    uri: (id) => `#/components/schemas/${id}`,
  }) as { schemas: Record<string, Schema> };
  for (const schema of Object.values(out.schemas)) {
    delete schema.$schema;
    delete schema.$id;
  }
  return out.schemas;
}

const LMSP_STATUSES = TASK_STATUSES.filter((s) => s !== 'input_required');

export const problemResponse = (description: string, headers: Record<string, unknown> = {}) => ({
  description,
  headers: { 'X-Request-Id': { $ref: '#/components/headers/RequestId' }, ...headers },
  content: { 'application/problem+json': { schema: ref('Problem') } },
});

export const jsonResponse = (description: string, schema: Schema, headers: Record<string, unknown> = {}) => ({
  description,
  headers: { 'X-Request-Id': { $ref: '#/components/headers/RequestId' }, ...headers },
  content: { 'application/json': { schema } },
});

export const sseResponse = (description: string) => ({
  description: `${description} Each event is \`event: <type>\`, \`id: <sequence_number>\`, \`data: <StreamEvent JSON>\`; comment lines are heartbeats; a \`retry:\` line precedes a server-side close (reconnect with Last-Event-ID). A stream opened with a JWT ends when the JWT expires (\`exp\` plus the clock tolerance) with \`event: error\`, no \`id:\`, whose data is the \`401 unauthorized\` Problem (reconnect with a fresh token and Last-Event-ID).`,
  headers: { 'X-Request-Id': { $ref: '#/components/headers/RequestId' } },
  content: { 'text/event-stream': { schema: { type: 'string' }, 'x-event-schema': ref('StreamEvent') } },
});

/** Errors every authenticated operation may answer. */
export const common = {
  '401': problemResponse('`unauthorized`: missing or invalid bearer token.', {
    'WWW-Authenticate': { schema: { type: 'string' } },
  }),
  '405': problemResponse('`invalid_request`: the path does not take this method.', {
    Allow: { schema: { type: 'string' } },
  }),
  '429': problemResponse(
    '`rate_limited`: request rate, unfinished tasks or open streams over the tenant limit. `too_many_auth_failures`: too many failed authentications from the client address (TASKLINE_AUTH_FAILURE_*); every request from it is refused until the window ends, a valid credential too unless this replica had already verified it. Retry after `Retry-After`.',
    {
      'Retry-After': { required: true, schema: { type: 'integer', minimum: 1 } },
    },
  ),
  '500': problemResponse('`internal_error`.'),
  '503': problemResponse(
    '`unavailable`: the task store cannot answer now; `replication_timeout`: a Redis replica did not confirm a create or cancel within TASKLINE_REPLICA_ACK_TIMEOUT_MS (retry with the same Idempotency-Key). Retry after `Retry-After`. For `unavailable`, `reason` says why: `connection` (unreachable), `timeout` (no answer within TASKLINE_REDIS_COMMAND_TIMEOUT_MS), `oom` (Redis memory full), `readonly` (a replica, after a failover), `busy` (a long script), `masterdown`, `loading` (Redis restarting), `noreplicas`, `tryagain`, `clusterdown`, `moved` (a Redis Cluster slot moved under the request).',
    { 'Retry-After': { required: true, schema: { type: 'integer', minimum: 1 } } },
  ),
};
export const bodyErrors = {
  '400': problemResponse(
    '`invalid_request` (malformed JSON, wrong types, unknown fields, bad headers) or `unsupported_capability`.',
  ),
  '404': problemResponse('`model_not_found`.'),
  '409': problemResponse('`idempotency_key_in_use`: a request with this key is still being accepted.'),
  '413': problemResponse('`payload_too_large`.'),
  '422': problemResponse('`idempotency_key_reused`: this key was used with a different body.'),
};
export const notFound = {
  '404': problemResponse('`task_not_found`: no such task for this tenant (also a task of another tenant).'),
};

export const jsonBody = (schema: string) => ({
  required: true,
  content: { 'application/json': { schema: ref(schema) } },
});
const params = {
  TaskId: { name: 'id', in: 'path', required: true, schema: { type: 'string' } },
  IdempotencyKey: {
    name: 'Idempotency-Key',
    in: 'header',
    required: false,
    schema: { type: 'string', pattern: '^[\\x21-\\x7e]{1,255}$' },
  },
  LastEventId: {
    name: 'Last-Event-ID',
    in: 'header',
    required: false,
    schema: { type: 'string', pattern: '^[0-9]+$' },
  },
  ResponseId: { name: 'id', in: 'path', required: true, schema: { type: 'string' } },
  ModelId: { name: 'id', in: 'path', required: true, schema: { type: 'string' } },
  Stream: {
    name: 'stream',
    in: 'query',
    required: false,
    schema: { enum: ['true', 'false'] },
    description: '`true`: the response’s events (as the task’s event stream) instead of the object.',
  },
  Include: {
    name: 'include',
    in: 'query',
    required: false,
    schema: { type: 'array', items: { type: 'string' } },
    description: `As on a create; also sent as \`include[]\` (the OpenAI SDKs). ${Include.description}`,
  },
  StartingAfter: {
    name: 'starting_after',
    in: 'query',
    required: false,
    schema: { type: 'integer', minimum: 0 },
  },
  After: {
    name: 'after',
    in: 'query',
    required: false,
    schema: { type: 'string' },
    description: 'The id of the item the page starts after (the previous page’s `last_id`).',
  },
  Limit: {
    name: 'limit',
    in: 'query',
    required: false,
    schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
  },
  Order: { name: 'order', in: 'query', required: false, schema: { enum: ['asc', 'desc'], default: 'desc' } },
};
/** A reference to one of the shared parameters. */
export const p = (name: keyof typeof params) => ({ $ref: `#/components/parameters/${name}` });
const count = { type: 'integer', minimum: 0 };
/** The details are OpenAI's members: always 0 here (no prompt cache, no reasoning). */
const usage = obj({
  input_tokens: count,
  output_tokens: count,
  total_tokens: count,
  input_tokens_details: obj({ cached_tokens: count, cache_write_tokens: count }),
  output_tokens_details: obj({ reasoning_tokens: count }),
});
/** The `components` section: security, shared headers, responses, parameters and schemas. */
export function components(): Schema {
  return {
    securitySchemes: {
      bearer: {
        type: 'http',
        scheme: 'bearer',
        description: 'A tenant API key, or a JWT whose configured claim names the tenant.',
      },
    },
    headers: {
      RequestId: {
        description: 'Echoed or generated request id, also in the logs.',
        schema: { type: 'string' },
      },
    },
    responses: {
      RouteNotFound: problemResponse(
        'No such route: 404 with code `invalid_request` (LMSP 1.0 section 9.3 has no route code).',
      ),
      MethodNotAllowed: problemResponse(
        'The path exists but not with this method: 405 with code `invalid_request`.',
        {
          Allow: { required: true, schema: { type: 'string' } },
        },
      ),
    },
    parameters: params,
    schemas: {
      ...requestSchemas(),
      Problem: obj(
        {
          type: { type: 'string' },
          title: { type: 'string' },
          status: { type: 'integer', minimum: 400, maximum: 599 },
          detail: { type: 'string' },
          code: { type: 'string', enum: [...ERROR_CODES] },
          message: {
            type: 'string',
            description:
              "The detail again, where OpenAI's Responses API has an error's text (`response.error.message`).",
          },
          errors: { type: 'array', items: obj({ path: { type: 'string' }, message: { type: 'string' } }) },
          task_status: { type: 'string' },
          reason: { enum: [...REDIS_UNAVAILABLE_REASONS] },
          task_id: {
            type: 'string',
            description:
              'On a 503 to a create that Redis did not confirm: the id its task has if it was written, and then runs (GET it before creating another).',
          },
          param: {
            type: 'string',
            description:
              'The request parameter at fault, a nested one dotted as in `errors` (`input.0.content`).',
          },
          error: {
            ...obj({
              message: { type: 'string' },
              type: { type: 'string' },
              code: { type: 'string' },
              param: nullable({ type: 'string' }),
            }),
            description:
              "The same error as OpenAI SDKs read it (`detail` as `message`; `param` in OpenAI's path form, `input[0].content`).",
          },
        },
        ['type', 'title', 'status', 'detail', 'code'],
      ),
      Task: {
        ...obj({
          id: { type: 'string', pattern: '^task_' },
          object: { const: 'task' },
          type: { const: 'response' },
          status: { enum: LMSP_STATUSES },
          created_at: { type: 'integer' },
          updated_at: { type: 'integer' },
          response_id: { type: 'string', pattern: '^resp_' },
          events_url: { type: 'string' },
          on_restart: { enum: [...ON_RESTART_POLICIES] },
          response: nullable(ref('Response')),
          error: nullable(ref('Problem')),
        }),
        additionalProperties: false,
      },
      Response: obj(
        {
          id: { type: 'string', pattern: '^resp_' },
          object: { const: 'response' },
          created_at: { type: 'integer' },
          status: { enum: ['queued', 'in_progress', 'completed', 'incomplete', 'failed', 'cancelled'] },
          model: { type: 'string' },
          output: { type: 'array', items: ref('OutputMessage') },
          usage: nullable(usage),
          error: nullable(ref('Problem')),
          incomplete_details: nullable(obj({ reason: { type: 'string' } })),
          instructions: nullable({ type: 'string' }),
          metadata: { type: 'object', additionalProperties: { type: 'string' } },
          temperature: nullable({ type: 'number' }),
          top_p: nullable({ type: 'number' }),
          max_output_tokens: nullable({ type: 'integer' }),
          // OpenAI's members: no tool runs in a response here.
          tools: { type: 'array', maxItems: 0 },
          tool_choice: { const: 'none' },
          parallel_tool_calls: { const: false },
        },
        [
          'id',
          'object',
          'created_at',
          'status',
          'model',
          'output',
          'usage',
          'error',
          'incomplete_details',
          'tools',
          'tool_choice',
          'parallel_tool_calls',
        ],
      ),
      OutputMessage: obj(
        {
          id: { type: 'string' },
          type: { const: 'message' },
          role: { const: 'assistant' },
          status: { type: 'string' },
          content: {
            type: 'array',
            items: obj({ type: { const: 'output_text' }, text: { type: 'string' } }, ['type', 'text']),
          },
        },
        ['type', 'role', 'content'],
      ),
      InputItemList: obj(
        {
          object: { const: 'list' },
          data: {
            type: 'array',
            items: obj(
              {
                id: { type: 'string', pattern: '^msg_' },
                type: { const: 'message' },
                role: { enum: ['user', 'assistant', 'system', 'developer'] },
                status: { const: 'completed' },
                content: {
                  type: 'array',
                  items: obj(
                    {
                      type: { enum: ['input_text', 'output_text'] },
                      text: { type: 'string' },
                      annotations: { type: 'array' },
                    },
                    ['type', 'text'],
                  ),
                },
              },
              ['id', 'type', 'role', 'status', 'content'],
            ),
          },
          first_id: nullable({ type: 'string' }),
          last_id: nullable({ type: 'string' }),
          has_more: { type: 'boolean' },
        },
        ['object', 'data', 'first_id', 'last_id', 'has_more'],
      ),
      StreamEvent: {
        ...obj(
          {
            type: { type: 'string', pattern: '^response\\.' },
            sequence_number: { type: 'integer', minimum: 1 },
            task_status: { enum: [...TASK_STATUSES] },
            response: ref('Response'),
            delta: { type: 'string' },
            error: ref('Problem'),
            reason: {
              enum: ['worker_lost', 'worker_draining'],
              description: 'On a restart: why the previous attempt stopped (a crash or a drain).',
            },
            on_restart: { enum: [...ON_RESTART_POLICIES] },
          },
          ['type', 'sequence_number'],
        ),
        description: [
          `LMSP 1.0 section 6.3. Exactly one final event ends a stream: ${FINAL_EVENT_TYPES.join(', ')}.`,
          `\`task_status\` is the status clients see; it only moves along LMSP 1.0 section 7.2's table (a new attempt of a running task stays \`running\`).`,
          `\`${RESTART_EVENT_TYPE}\` (Taskline): a task with \`on_restart: "retry"\` was interrupted (\`reason\`) and runs again from the start. Sent once per restart. Discard everything assembled from the events before it (output items, content parts, text deltas) and start again from its \`response\` (empty, \`in_progress\`): the events after it are the new attempt's, and they alone add up to the final response.`,
          `Lifecycle events (\`response.created\`, \`response.in_progress\`, the final events) carry the \`response\` they stand for, as OpenAI SDK stream helpers expect.`,
          `A \`resume\` restart is a \`response.in_progress\` with \`reason\` and \`resumed_from_tokens\`: the text before it stays, the deltas after it continue it.`,
        ].join(' '),
      },
      Capabilities: obj({
        object: { const: 'capabilities' },
        lmsp_version: { type: 'string' },
        event_resume: { type: 'boolean' },
        task_types: { type: 'array', items: { const: 'response' } },
        on_restart: { type: 'array', items: { enum: [...ON_RESTART_POLICIES] } },
        models: { type: 'array', items: { type: 'string' } },
        resume_models: { type: 'array', items: { type: 'string' } },
        retention: obj({
          task_seconds: { type: 'integer' },
          event_seconds: { type: 'integer' },
          idempotency_key_seconds: { type: 'integer' },
        }),
        limits: obj({
          max_body_bytes: { type: 'integer' },
          max_output_tokens: { type: 'integer' },
          requests_per_second: { type: 'number' },
          request_burst: { type: 'integer' },
          max_active_tasks: { type: 'integer' },
          max_open_streams: { type: 'integer' },
        }),
        heartbeat_seconds: { type: 'number' },
        durability: {
          ...obj({
            level: { enum: ['always', 'everysec'] },
            crash_may_lose: { type: 'string' },
            replica_ack_timeout_ms: { type: 'integer' },
          }),
          description:
            'TASKLINE_DURABILITY. `always`: a 202 (or a cancel, an answer) is sent only once the write is on disk and on every connected Redis replica. `everysec`: the operator accepts that a power loss can lose about the last second of acknowledged writes; `crash_may_lose` says what.',
        },
      }),
      Model: obj({
        id: { type: 'string' },
        object: { const: 'model' },
        owned_by: { type: 'string' },
        capabilities: obj({ snapshot: { type: 'boolean' } }),
      }),
      ModelList: obj({ object: { const: 'list' }, data: { type: 'array', items: ref('Model') } }),
      /** OpenAI's answer to `responses.delete`. */
      ResponseDeleted: obj({
        id: { type: 'string' },
        object: { const: 'response' },
        deleted: { const: true },
      }),
      Health: obj({ status: { const: 'ok' } }),
      Liveness: obj(
        {
          status: { const: 'ok' },
          service: { type: 'string' },
          version: { type: 'string', description: "The service's package version." },
          revision: { type: 'string', description: 'The source revision of the image, or `unknown`.' },
          node: { type: 'string', description: 'The Node.js runtime.' },
        },
        ['status'],
      ),
    },
  };
}
