/** The OpenAPI paths and schemas of the tenant's webhook endpoints (`webhooks.ts`; docs/webhooks.md). */
import { HOOK_EVENTS } from '@taskline/webhooks';
import {
  common,
  jsonBody,
  jsonResponse,
  nullable,
  obj,
  problemResponse,
  ref,
  type Schema,
} from './openapi-parts.js';

const param = { name: 'id', in: 'path', required: true, schema: { type: 'string' } };
const notFound = { '404': problemResponse('`webhook_not_found`: no such endpoint for this tenant.') };
const bodyErrors = {
  '400': problemResponse(
    '`invalid_request`: malformed JSON, wrong types, unknown fields, too many endpoints.',
  ),
  '413': problemResponse('`payload_too_large`.'),
  '422': problemResponse(
    '`webhook_url_refused`: not https (unless TASKLINE_WEBHOOK_ALLOW_HTTP), credentials in the URL, or a private, loopback or link-local address (unless TASKLINE_WEBHOOK_ALLOW_PRIVATE).',
  ),
};

const token = { name: 'token', in: 'path', required: true, schema: { type: 'string' } };
const linkRefused = {
  '403': problemResponse(
    '`answer_link_refused`: not a valid link, expired, or its question is no longer open (the task moved on).',
  ),
  '405': common['405'],
};

export function webhookPaths(): Schema {
  return {
    '/lmsp/v1/answer-links/{token}': {
      get: {
        operationId: 'showAnswerLink',
        security: [],
        summary:
          'A page with the link’s one button; changes nothing (link previews and crawlers are harmless).',
        parameters: [token],
        responses: {
          '200': { description: 'An HTML page.', content: { 'text/html': { schema: { type: 'string' } } } },
          ...linkRefused,
        },
      },
      post: {
        operationId: 'useAnswerLink',
        security: [],
        summary:
          'Answer the question the link names (accept or decline) or cancel its task, without an API key; once.',
        parameters: [token],
        responses: {
          '200': jsonResponse('What the link did.', ref('AnswerLinkResult')),
          ...linkRefused,
          '410': problemResponse('`answer_link_used`: the link worked once already.'),
        },
      },
    },
    '/lmsp/v1/callbacks/{token}': {
      post: {
        operationId: 'postCallback',
        security: [],
        summary:
          'Deliver an outside job’s result (any JSON body) to the tool task waiting on it in `ctx.awaitCallback`, without an API key; once.',
        parameters: [token],
        requestBody: {
          required: true,
          content: { 'application/json': { schema: {} } },
        },
        responses: {
          '200': jsonResponse('The callback was taken; the task resumes.', ref('CallbackResult')),
          '400': problemResponse('`invalid_request`: no JSON body, or malformed JSON.'),
          '403': problemResponse(
            '`callback_refused`: not a valid callback URL, or its task ended (its deadline passed) or never waited for it.',
          ),
          '405': common['405'],
          '410': problemResponse('`callback_used`: the URL took its one callback already.'),
          '413': problemResponse('`payload_too_large`: a body over TASKLINE_MAX_BODY_BYTES.'),
        },
      },
    },
    '/lmsp/v1/webhooks': {
      get: {
        operationId: 'listWebhooks',
        responses: {
          '200': jsonResponse('The tenant’s endpoints (no secrets).', ref('WebhookList')),
          ...common,
        },
      },
      post: {
        operationId: 'createWebhook',
        summary: 'Register an endpoint; the reply is the only one that shows its signing secret.',
        requestBody: jsonBody('CreateWebhookRequest'),
        responses: {
          '201': jsonResponse(
            'The endpoint, with `secret` (`whsec_…`): keep it, it is never shown again.',
            ref('Webhook'),
          ),
          ...bodyErrors,
          ...common,
        },
      },
    },
    '/lmsp/v1/webhooks/{id}': {
      get: {
        operationId: 'getWebhook',
        parameters: [param],
        responses: {
          '200': jsonResponse('The endpoint (no secret).', ref('Webhook')),
          ...notFound,
          ...common,
        },
      },
      patch: {
        operationId: 'updateWebhook',
        summary:
          'Change url, events, result inclusion, or enable/disable (enabling clears its failure count).',
        parameters: [param],
        requestBody: jsonBody('UpdateWebhookRequest'),
        responses: {
          '200': jsonResponse('The endpoint.', ref('Webhook')),
          ...notFound,
          ...bodyErrors,
          ...common,
        },
      },
      delete: {
        operationId: 'deleteWebhook',
        parameters: [param],
        responses: { '204': { description: 'Deleted.' }, ...notFound, ...common },
      },
    },
    '/lmsp/v1/webhooks/{id}/rotate': {
      post: {
        operationId: 'rotateWebhookSecret',
        summary:
          'A new signing secret, shown once; the previous one keeps signing beside it for TASKLINE_WEBHOOK_ROTATION_OVERLAP_S (two signatures in `webhook-signature`).',
        parameters: [param],
        responses: {
          '200': jsonResponse('The endpoint, with the new `secret`.', ref('Webhook')),
          ...notFound,
          ...common,
        },
      },
    },
    '/lmsp/v1/webhooks/{id}/attempts': {
      get: {
        operationId: 'listWebhookAttempts',
        summary: 'The endpoint’s newest delivery attempts (at most 200), newest first.',
        parameters: [param],
        responses: { '200': jsonResponse('Attempts.', ref('WebhookAttemptList')), ...notFound, ...common },
      },
    },
    '/lmsp/v1/webhooks/{id}/redeliver': {
      post: {
        operationId: 'redeliverWebhook',
        summary:
          'Queue again one kept message (`message_id`) or every one written in [`since`, `until`] (Unix seconds), with the same `webhook-id`.',
        parameters: [param],
        requestBody: jsonBody('RedeliverRequest'),
        responses: {
          '202': jsonResponse('How many messages were queued again.', ref('WebhookRedelivery')),
          ...notFound,
          ...bodyErrors,
          ...common,
        },
      },
    },
  };
}

export function webhookSchemas(): Record<string, Schema> {
  const webhook = obj(
    {
      object: { const: 'webhook_endpoint' },
      id: { type: 'string' },
      url: { type: 'string' },
      events: { type: 'array', items: { enum: [...HOOK_EVENTS] } },
      include_result: { type: 'boolean' },
      enabled: { type: 'boolean' },
      disabled_reason: nullable({ type: 'string' }),
      disabled_at: nullable({
        type: 'integer',
        description: 'When it was disabled (Unix seconds); null while enabled.',
      }),
      created_at: { type: 'integer' },
      secret: { type: 'string', description: 'Only in the reply of a create or a rotation.' },
    },
    [
      'object',
      'id',
      'url',
      'events',
      'include_result',
      'enabled',
      'disabled_reason',
      'disabled_at',
      'created_at',
    ],
  );
  const attempt = obj({
    object: { const: 'webhook_attempt' },
    message_id: { type: 'string' },
    attempt: { type: 'integer', minimum: 1 },
    at: { type: 'integer' },
    ok: { type: 'boolean' },
    status: nullable({ type: 'integer' }),
    latency_ms: { type: 'integer', minimum: 0 },
    response: {
      type: 'string',
      description: 'The response body’s start (512 characters), or why none came.',
    },
  });
  return {
    Webhook: webhook,
    WebhookList: obj({ object: { const: 'list' }, data: { type: 'array', items: ref('Webhook') } }),
    WebhookAttemptList: obj({ object: { const: 'list' }, data: { type: 'array', items: attempt } }),
    AnswerLinkResult: obj({
      object: { const: 'answer_link_result' },
      task_id: { type: 'string' },
      choice: { enum: ['accept', 'decline', 'cancel'] },
      task_status: { type: 'string' },
    }),
    CallbackResult: obj({
      object: { const: 'callback_result' },
      task_id: { type: 'string' },
      task_status: { type: 'string' },
    }),
    WebhookRedelivery: obj({
      object: { const: 'webhook_redelivery' },
      queued: { type: 'integer', minimum: 0 },
    }),
  };
}
