// The OpenAPI document of `/admin/v1`.
import { TASK_STATUSES } from '@taskline/engine';

/** A tenant id as the routes take it (the `tenant` path parameter, the tenant search). */
const TENANT = '^[A-Za-z0-9._-]{1,64}$';
const BODY =
  'It takes no body: one sent anyway must be JSON, an object or an array (400 otherwise), of at most 1 KiB (413 beyond).';

/** The OpenAPI document of `/admin/v1`, served at `/admin/v1/openapi.json`. */
export function adminOpenApi(): Record<string, unknown> {
  const json = (description: string, schema: Record<string, unknown> = { type: 'object' }) => ({
    description,
    content: { 'application/json': { schema } },
  });
  const problem = {
    description: 'A problem (`application/problem+json`) with a stable `code`.',
    content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
  };
  // 503 `unavailable` (with Retry-After): Redis cannot take the request now, on any route.
  const refused = { '401': problem, '403': problem, '429': problem, '503': problem };
  // An action takes no body; one sent anyway is read (bounded) before it is ignored.
  const actionRefused = { '400': problem, '404': problem, '409': problem, '413': problem, ...refused };
  const q = (name: string, schema: Record<string, unknown>, description: string) => ({
    name,
    in: 'query',
    required: false,
    schema,
    description,
  });
  const taskParams = [
    { name: 'tenant', in: 'path', required: true, schema: { type: 'string', pattern: TENANT } },
    q('status', { $ref: '#/components/schemas/TaskStatus' }, 'Only this status.'),
    q('type', { type: 'string', enum: ['response', 'tool'] }, 'Only this task type.'),
    q('model', { type: 'string', pattern: '^\\S{1,128}$' }, 'Only this model.'),
    q(
      'max_age_s',
      { type: 'integer', minimum: 1, maximum: 365 * 86400 },
      'Only tasks created within this many seconds.',
    ),
    q('limit', { type: 'integer', minimum: 1, maximum: 200 }, 'Rows per page (50).'),
  ];
  const feed = (what: string, event: string, parameters: Record<string, unknown>[] = []) => ({
    get: {
      summary:
        `${what} as SSE: an \`${event}\` event (the JSON route's body) now and every 2 s, \`id:\` its time in ms; ` +
        'heartbeat comments; resume with Last-Event-ID or starting_after (the current snapshot unless it is that one, then newer ones). ' +
        "Counts against the operator's open-stream cap (429); ended with a `retry:` hint on shutdown, and with an `error` event carrying the 401 problem when the operator's JWT expires.",
      parameters: [
        ...parameters,
        q('starting_after', { type: 'integer', minimum: 0 }, 'Resume after this snapshot id.'),
      ],
      responses: {
        '200': {
          description: 'text/event-stream',
          content: { 'text/event-stream': { schema: { type: 'string' } } },
        },
        '400': problem,
        ...refused,
      },
    },
  });
  const id = { name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: '^task_' } };
  const hookId = { name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: '^ep_' } };
  return {
    openapi: '3.1.0',
    info: {
      title: 'Taskline operator API',
      version: '1.0.0',
      description:
        'What the operator console at /console shows, for scripts. Every route needs an operator ' +
        'credential (a key from TASKLINE_ADMIN_KEYS, or a JWT carrying TASKLINE_JWT_ADMIN_ROLE and a `sub`); valid tenant ' +
        'credentials get 403 `forbidden`; none, or a token that is no credential at all (unknown, forged, ' +
        'expired), 401 `unauthorized` with WWW-Authenticate. A client address past TASKLINE_AUTH_FAILURE_LIMIT ' +
        'failed authentications gets 429 `too_many_auth_failures` with Retry-After for every request, an ' +
        'operator credential too, until its window ends. A path asked with a method it does not take is ' +
        '405 `invalid_request` with `Allow` (OPTIONS: 204 with `Allow`, without credentials), as on LMSP; paths are case-sensitive. A Redis that cannot ' +
        'take the request now (unreachable, full, loading) is 503 `unavailable` with Retry-After. Answers are ' +
        '`Cache-Control: no-store`.',
    },
    servers: [{ url: '/admin/v1' }],
    security: [{ bearer: [] }],
    paths: {
      '/overview': {
        get: {
          summary:
            'Per model queue depth, oldest wait and worker slots; leader; throughput per minute; SLO burn rates.',
          responses: { '200': json('The overview.'), ...refused },
        },
      },
      '/overview/events': feed('The overview', 'overview'),
      '/tenants': {
        get: {
          summary:
            'Tenants active within the task retention, busiest first (queued + dispatched), paginated; each with every unfinished task counted by status (`unfinished`), failures by code in the last hour (`failures_last_hour`) and limit usage (`limits`: unfinished tasks with creates in flight, and open streams, as the caps count them).',
          parameters: [
            q('q', { type: 'string', pattern: TENANT }, 'Only tenants whose id contains this.'),
            q('offset', { type: 'integer', minimum: 0, maximum: 1000 }, 'Rows to skip.'),
            q('limit', { type: 'integer', minimum: 1, maximum: 100 }, 'Rows per page (20).'),
          ],
          responses: {
            '200': json('A page of tenants with their counts and limit usage.'),
            '400': problem,
            ...refused,
          },
        },
      },
      '/tenants/{tenant}/tasks': {
        get: {
          summary: "A tenant's recent tasks from the operator index, newest first.",
          parameters: [
            ...taskParams,
            q(
              'cursor',
              { type: 'string', pattern: '^[0-9]{1,16}:[0-9]{1,9}$' },
              '`next_cursor` of the previous page.',
            ),
          ],
          responses: {
            '200': json('A page of tasks (a tool task with its `tool`) and `next_cursor` (null at the end).'),
            '400': problem,
            ...refused,
          },
        },
      },
      '/tenants/{tenant}/tasks/events': feed(
        "The first page of a tenant's tasks (the same query parameters but `cursor`)",
        'tasks',
        taskParams,
      ),
      '/tasks/{id}': {
        get: {
          summary:
            "A task: record (a tool task's `tool`, attempt, lease owner and expiry, on_restart, times, the Idempotency-Key its create carried), timeline of its states, open input requests.",
          parameters: [id],
          responses: { '200': json('The task.'), '400': problem, '404': problem, ...refused },
        },
      },
      '/tasks/{id}/events': {
        get: {
          summary:
            "The task's events as SSE: history, then live, then the end. Resume with Last-Event-ID or starting_after, as on LMSP.",
          parameters: [
            id,
            q('starting_after', { type: 'integer', minimum: 0 }, 'Resume after this sequence number.'),
          ],
          responses: {
            '200': {
              description: 'text/event-stream',
              content: { 'text/event-stream': { schema: { type: 'string' } } },
            },
            '400': problem,
            '404': problem,
            '410': problem,
            ...refused,
          },
        },
      },
      '/tasks/{id}/cancel': {
        post: {
          summary:
            'Cancels the task (the same fenced cancel tenants get), recorded as an operator action in its events. ' +
            BODY,
          parameters: [id],
          responses: { '200': json('`outcome` and the task.'), ...actionRefused },
        },
      },
      '/tenants/{tenant}/webhooks': {
        get: {
          summary:
            "A tenant's webhook endpoints (never a secret), each with its failed attempts in a row and its 20 newest attempts.",
          parameters: [taskParams[0]],
          responses: { '200': json('Endpoints.'), '400': problem, ...refused },
        },
      },
      '/tenants/{tenant}/webhooks/{id}/enable': {
        post: {
          summary:
            'Enables an endpoint again (one disabled for failing): its waiting deliveries resume. ' + BODY,
          parameters: [taskParams[0], hookId],
          responses: { '200': json('The endpoint.'), ...actionRefused },
        },
      },
      '/tenants/{tenant}/webhooks/{id}/redeliver': {
        post: {
          summary:
            'Queues again, with their `webhook-id`, the kept messages of an endpoint written from `since` to `until` (Unix seconds; until: now). ' +
            BODY,
          parameters: [
            taskParams[0],
            hookId,
            { name: 'since', in: 'query', required: true, schema: { type: 'integer', minimum: 0 } },
            q('until', { type: 'integer', minimum: 0 }, 'Unix seconds; now by default.'),
          ],
          responses: { '200': json('How many were queued.'), ...actionRefused },
        },
      },
      '/tasks/{id}/requeue': {
        post: {
          summary:
            'Queues a stuck task again: a queued one is offered again; a loading, running or input_required one only once its lease has lapsed. Recorded as an operator action. ' +
            BODY,
          parameters: [id],
          responses: { '200': json('The task.'), ...actionRefused },
        },
      },
      '/workers': {
        get: {
          summary:
            "Workers as the leader scheduler knows them (models, slots, draining, lease renewals, last heartbeat; a tool worker's tools with their versions) and the leader's address.",
          responses: { '200': json('Workers and leader.'), ...refused },
        },
      },
      '/workers/events': feed('Workers and leader', 'workers'),
      '/slo': {
        get: {
          summary: 'SLO burn rates from Prometheus (TASKLINE_PROMETHEUS_URL), or `configured: false`.',
          responses: { '200': json('Burn rates.'), ...refused },
        },
      },
      '/openapi.json': {
        get: { summary: 'This document.', responses: { '200': json('OpenAPI 3.1.'), ...refused } },
      },
    },
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: {
        TaskStatus: { type: 'string', enum: [...TASK_STATUSES] },
        Problem: {
          type: 'object',
          required: ['type', 'title', 'status', 'code'],
          properties: {
            type: { type: 'string' },
            title: { type: 'string' },
            status: { type: 'integer' },
            detail: { type: 'string' },
            code: { type: 'string' },
          },
        },
      },
    },
  };
}
