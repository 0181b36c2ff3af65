/**
 * The tenant's webhook endpoints under `/lmsp/v1/webhooks` (docs/webhooks.md): create (the one
 * reply that shows the signing secret), list, read, change, delete, rotate the secret, read the
 * attempt log, redeliver. Every route acts on the caller's own tenant only.
 */
import express, { type Request, type Response, type Router } from 'express';
import { z } from 'zod';
import { TasklineError } from '@taskline/engine';
import {
  EndpointError,
  HOOK_EVENTS,
  hookKeys,
  viewOf,
  type EndpointStore,
  type AttemptResult,
  type EndpointView,
  type Redeliveries,
} from '@taskline/webhooks';
import type { Redis } from 'ioredis';
import { methodNotAllowed } from '../problem.js';
import { parseBody } from './schema.js';

export interface WebhookRouteDeps {
  redis: Redis;
  endpoints: EndpointStore;
  redeliveries: Redeliveries;
  tenantOf: (req: Request) => string;
}

const Events = z.array(z.enum(HOOK_EVENTS)).min(1).max(HOOK_EVENTS.length);
export const CreateWebhookRequest = z.strictObject({
  url: z.string().max(2048),
  events: Events.optional(),
  include_result: z.boolean().optional(),
});
export const UpdateWebhookRequest = z.strictObject({
  url: z.string().max(2048).optional(),
  events: Events.optional(),
  include_result: z.boolean().optional(),
  enabled: z.boolean().optional(),
});
export const RedeliverRequest = z.union([
  z.strictObject({ message_id: z.string().max(128) }),
  z.strictObject({ since: z.number().int().min(0), until: z.number().int().min(0) }),
]);

/** An endpoint as the API shows it (never a secret, but the one a create or rotate just made). */
export function webhookObject(view: EndpointView & { secret?: string }) {
  return {
    object: 'webhook_endpoint',
    id: view.id,
    url: view.url,
    events: view.events,
    include_result: view.includeResult,
    enabled: view.enabled,
    disabled_reason: view.disabledReason,
    created_at: Math.floor(view.createdAt / 1000),
    ...(view.secret !== undefined && { secret: view.secret }),
  };
}

/** The webhook package's refusals in the API's stable codes. */
function asTasklineError(err: unknown): unknown {
  if (!(err instanceof EndpointError)) return err;
  if (err.code === 'webhook_not_found') return new TasklineError('webhook_not_found', err.message);
  if (err.code === 'webhook_invalid') return new TasklineError('invalid_request', err.message);
  return new TasklineError('webhook_url_refused', err.message, { param: 'url' });
}

const translated =
  (handler: (req: Request, res: Response) => Promise<void>) =>
  async (req: Request, res: Response): Promise<void> => {
    try {
      await handler(req, res);
    } catch (err) {
      throw asTasklineError(err);
    }
  };

export function mountWebhookRoutes(router: Router, deps: WebhookRouteDeps): void {
  const { endpoints, redeliveries, tenantOf } = deps;
  const id = (req: Request) => String(req.params.id);
  const routes = express.Router({ caseSensitive: true });

  routes
    .route('/webhooks')
    .get(
      translated(async (req, res) => {
        const all = await endpoints.list(tenantOf(req));
        res.json({ object: 'list', data: all.map((e) => webhookObject(viewOf(e))) });
      }),
    )
    .post(
      translated(async (req, res) => {
        const body = parseBody(CreateWebhookRequest, req.body);
        const created = await endpoints.create(tenantOf(req), {
          url: body.url,
          events: body.events,
          includeResult: body.include_result,
        });
        res.status(201).location(`/lmsp/v1/webhooks/${created.id}`).json(webhookObject(created));
      }),
    )
    .all(methodNotAllowed(['GET', 'POST']));
  routes
    .route('/webhooks/:id')
    .get(
      translated(
        async (req, res) => void res.json(webhookObject(viewOf(await endpoints.get(tenantOf(req), id(req))))),
      ),
    )
    .patch(
      translated(async (req, res) => {
        const body = parseBody(UpdateWebhookRequest, req.body);
        const view = await endpoints.update(tenantOf(req), id(req), {
          url: body.url,
          events: body.events,
          includeResult: body.include_result,
          enabled: body.enabled,
        });
        res.json(webhookObject(view));
      }),
    )
    .delete(
      translated(async (req, res) => {
        await endpoints.delete(tenantOf(req), id(req));
        res.status(204).end();
      }),
    )
    .all(methodNotAllowed(['GET', 'PATCH', 'DELETE']));
  routes
    .route('/webhooks/:id/rotate')
    .post(
      translated(
        async (req, res) => void res.json(webhookObject(await endpoints.rotate(tenantOf(req), id(req)))),
      ),
    )
    .all(methodNotAllowed(['POST']));
  routes
    .route('/webhooks/:id/attempts')
    .get(translated((req, res) => attempts(deps, req, res)))
    .all(methodNotAllowed(['GET']));
  routes
    .route('/webhooks/:id/redeliver')
    .post(
      translated(async (req, res) => {
        const body = parseBody(RedeliverRequest, req.body);
        const tenant = tenantOf(req);
        await endpoints.get(tenant, id(req));
        const queued =
          'message_id' in body
            ? Number(await redeliveries.one(tenant, id(req), body.message_id))
            : await redeliveries.range(tenant, id(req), body.since * 1000, body.until * 1000);
        res.status(202).json({ object: 'webhook_redelivery', queued });
      }),
    )
    .all(methodNotAllowed(['POST']));
  router.use(routes);
}

/** The endpoint's newest attempts, newest first (at most 200 are kept). */
async function attempts(deps: WebhookRouteDeps, req: Request, res: Response): Promise<void> {
  const tenant = deps.tenantOf(req);
  const endpoint = String(req.params.id);
  await deps.endpoints.get(tenant, endpoint);
  const raw = await deps.redis.lrange(hookKeys.attempts(tenant, endpoint), 0, 199);
  res.json({ object: 'list', data: raw.map(attemptObject) });
}

function attemptObject(line: string) {
  const a = JSON.parse(line) as AttemptResult & { message: string; attempt: number; at: number };
  return {
    object: 'webhook_attempt',
    message_id: a.message,
    attempt: a.attempt,
    at: a.at,
    ok: a.ok,
    status: a.status,
    latency_ms: a.latencyMs,
    response: a.response,
  };
}
