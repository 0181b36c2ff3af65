/**
 * The OpenAPI 3.1 document of the whole `api` surface. Request schemas come from the zod
 * schemas that validate them (one source); the rest mirrors `schema.ts`. Committed as
 * `services/api/openapi.json` (`pnpm --filter @taskline/api openapi`); a test keeps the two equal.
 */
import {
  bodyErrors,
  common,
  components,
  jsonBody,
  jsonResponse,
  notFound,
  p,
  problemResponse,
  ref,
  sseResponse,
  type Schema,
} from './openapi-parts.js';
import { webhookPaths, webhookSchemas } from './openapi-webhooks.js';
import { LMSP_VERSION } from './schema.js';

/** OpenAI's streaming `error` event, on the OpenAI surface's streams (`openai/events.ts`). */
const CUT_SHORT =
  'A stream cut short (a background one by a shutting-down replica; any one, `stream: true` creates too, for a reader too far behind) sends `event: error` with `{ type: "error", code: "unavailable", message, param: null, sequence_number }` (the OpenAI SDKs raise it; its message names the `starting_after` to resume from; `sequence_number` is the last event’s plus one, the resume point’s plus one when none was sent, and the frame has no `id:`), then its `retry:` line. A response stream whose API key is revoked while it is open, or whose JWT expires (`exp` plus the clock tolerance), ends with `event: error` and `code: "unauthorized"`, without `retry:`.';

export function buildOpenApi(): Schema {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Taskline LMSP API',
      version: LMSP_VERSION,
      description:
        'LMSP 1.0 responses, durable tasks and resumable event streams (LMSP 1.0 sections 6, 7 and 9), also usable through the official OpenAI SDKs (background responses are tasks). Every error is application/problem+json with a stable `code`, and carries the OpenAI-style `error` member (`message`, `type`, `code`, `param`) that those SDKs read. Prometheus metrics are not served on this port: each replica serves `/metrics` on its own metrics listener (`TASKLINE_METRICS_PORT`), for the scraper only. Paths are case-sensitive. OPTIONS on any path here answers 204 with `Allow`, without credentials; no CORS headers are sent (the API is not served to browser scripts of other origins).',
    },
    security: [{ bearer: [] }],
    paths: {
      '/lmsp/v1/tasks': {
        post: {
          operationId: 'createTask',
          summary: 'Create a task (LMSP 7.1); persisted before 202.',
          parameters: [p('IdempotencyKey')],
          requestBody: jsonBody('CreateTaskRequest'),
          responses: {
            '202': jsonResponse(
              'The task, persisted; the same task again for a retried Idempotency-Key.',
              ref('Task'),
              {
                Location: { schema: { type: 'string' } },
              },
            ),
            ...bodyErrors,
            ...common,
          },
        },
      },
      '/lmsp/v1/tasks/{id}': {
        get: {
          operationId: 'getTask',
          parameters: [p('TaskId')],
          responses: { '200': jsonResponse('The task.', ref('Task')), ...notFound, ...common },
        },
      },
      '/lmsp/v1/tasks/{id}/cancel': {
        post: {
          operationId: 'cancelTask',
          summary: 'Cancel (LMSP 7.3): queued ends at once, loading/running become cancelling; idempotent.',
          parameters: [p('TaskId')],
          responses: {
            '200': jsonResponse('The task after the request.', ref('Task')),
            ...notFound,
            '409': problemResponse(
              '`task_not_cancelable`: the task already succeeded or failed (`x-should-retry: false`).',
            ),
            ...common,
          },
        },
      },
      '/lmsp/v1/tasks/{id}/events': {
        get: {
          operationId: 'streamTaskEvents',
          summary: 'The task’s events (LMSP 7.4): missed events, then live ones, then one final event.',
          parameters: [p('TaskId'), p('LastEventId'), p('StartingAfter')],
          responses: {
            '200': sseResponse('Server-sent events.'),
            '204': {
              description:
                'The task has ended and the resume point is its final event: nothing will follow (an EventSource stops reconnecting).',
            },
            '400': problemResponse('`invalid_request`: a malformed or future resume point.'),
            ...notFound,
            '410': problemResponse(
              '`event_history_expired`: events after the resume point are no longer kept.',
            ),
            ...common,
          },
        },
      },
      '/lmsp/v1/responses': {
        post: {
          operationId: 'createResponse',
          summary:
            'Run a response: JSON when it ends, or SSE with `stream: true`. A caller that disconnects cancels it, unless the request carries an Idempotency-Key: then the response runs on, and a retry with the same key and body gets the finished response (or the whole stream from its first event).',
          parameters: [p('IdempotencyKey')],
          requestBody: jsonBody('ResponseRequest'),
          responses: {
            '200': {
              ...jsonResponse(
                `The finished response (any outcome), or its events with \`stream: true\`. ${CUT_SHORT}`,
                ref('Response'),
              ),
              content: {
                'application/json': { schema: ref('Response') },
                'text/event-stream': { schema: { type: 'string' }, 'x-event-schema': ref('StreamEvent') },
              },
            },
            '202': jsonResponse(
              '`background: true` without `stream`: the response, queued, persisted as a task (`resp_<x>` is produced by `task_<x>`); follow it at `/lmsp/v1/responses/{id}` or as a task.',
              ref('Response'),
              { Location: { schema: { type: 'string' } } },
            ),
            ...bodyErrors,
            ...common,
          },
        },
      },
      '/lmsp/v1/responses/{id}': {
        get: {
          operationId: 'getResponse',
          summary:
            'The response as it stands (its task’s state), or with `stream=true` its events: missed ones from the resume point, then live ones (LMSP 7.4).',
          parameters: [p('ResponseId'), p('Stream'), p('LastEventId'), p('StartingAfter'), p('Include')],
          responses: {
            '200': {
              ...jsonResponse(
                `The response, or its events with \`stream=true\`. ${CUT_SHORT}`,
                ref('Response'),
              ),
              content: {
                'application/json': { schema: ref('Response') },
                'text/event-stream': { schema: { type: 'string' }, 'x-event-schema': ref('StreamEvent') },
              },
            },
            '400': problemResponse(
              '`invalid_request`: a malformed `stream`, a malformed or future resume point, or an `include` value not honoured (named in `param`).',
            ),
            '404': problemResponse('`task_not_found`: no such response for this tenant.'),
            '410': problemResponse(
              '`event_history_expired`: events after the resume point are no longer kept.',
            ),
            ...common,
          },
        },
        delete: {
          operationId: 'deleteResponse',
          summary:
            'Delete an ended response (OpenAI’s `responses.delete`): its task, events and input go at once, and every later read of it is `404 task_not_found`, as for one never made.',
          parameters: [p('ResponseId')],
          responses: {
            '200': jsonResponse('Deleted.', ref('ResponseDeleted')),
            '404': problemResponse('`task_not_found`: no such response for this tenant.'),
            '409': problemResponse(
              '`task_not_deletable`: the response has not ended; cancel it, then delete it once it has (`x-should-retry: false`).',
            ),
            ...common,
          },
        },
      },
      '/lmsp/v1/responses/{id}/input_items': {
        get: {
          operationId: 'listResponseInputItems',
          summary:
            'The response’s input as message items (OpenAI’s `responses.inputItems.list`), in cursor pages: newest first unless `order=asc`. Item ids are the item’s place in the input.',
          parameters: [p('ResponseId'), p('After'), p('Limit'), p('Order'), p('Include')],
          responses: {
            '200': jsonResponse('One page of input items.', ref('InputItemList')),
            '400': problemResponse(
              '`invalid_request`: a malformed `limit` or `order`, an `after` that is not an item of this response, or an `include` value not honoured.',
            ),
            '404': problemResponse('`task_not_found`: no such response for this tenant.'),
            ...common,
          },
        },
      },
      '/lmsp/v1/responses/{id}/cancel': {
        post: {
          operationId: 'cancelResponse',
          summary:
            'Cancel the response’s task (LMSP 7.3): queued ends at once, a running one is `in_progress` until it stops.',
          parameters: [p('ResponseId')],
          responses: {
            '200': jsonResponse('The response after the request.', ref('Response')),
            '404': problemResponse('`task_not_found`: no such response for this tenant.'),
            '409': problemResponse(
              '`task_not_cancelable`: the response already ended, not cancelled (`x-should-retry: false`).',
            ),
            ...common,
          },
        },
      },
      '/lmsp/v1/capabilities': {
        get: {
          operationId: 'getCapabilities',
          responses: {
            '200': jsonResponse('What this deployment supports.', ref('Capabilities')),
            ...common,
          },
        },
      },
      '/lmsp/v1/models': {
        get: {
          operationId: 'listModels',
          responses: { '200': jsonResponse('The models served.', ref('ModelList')), ...common },
        },
      },
      '/lmsp/v1/models/{id}': {
        get: {
          operationId: 'getModel',
          summary: 'One served model (what the OpenAI SDKs call `models.retrieve`).',
          parameters: [p('ModelId')],
          responses: {
            '200': jsonResponse('The model.', ref('Model')),
            '404': problemResponse('`model_not_found`: this deployment does not serve the model.'),
            ...common,
          },
        },
      },
      ...webhookPaths(),
      '/lmsp/v1/openapi.json': {
        get: {
          operationId: 'getOpenApi',
          security: [],
          description: 'Served without credentials.',
          responses: { '200': jsonResponse('This document.', { type: 'object' }), '405': common['405'] },
        },
      },
      '/healthz': {
        get: {
          operationId: 'health',
          security: [],
          responses: {
            '200': jsonResponse('The process is up, and its version and build.', ref('Liveness')),
          },
        },
      },
      '/readyz': {
        get: {
          operationId: 'ready',
          security: [],
          responses: {
            '200': jsonResponse('Redis is reachable and the replica takes traffic.', ref('Health')),
            '503': problemResponse('`unavailable`: Redis unreachable, or the replica is draining.'),
          },
        },
      },
    },
    components: withSchemas(components(), webhookSchemas()),
  };
}

function withSchemas(all: Schema, more: Record<string, Schema>): Schema {
  return { ...all, schemas: { ...(all.schemas as Record<string, Schema>), ...more } };
}
