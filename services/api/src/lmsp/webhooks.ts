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
    disabled_at: view.disabledAt ? Math.floor(view.disabledAt / 1000) : null,
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

type Handler = (req: Request, res: Response) => Promise<void>;
const endpointId = (req: Request) => String(req.params.id);

/** The handlers of the routes below, each acting on the caller's tenant. */
function handlers(deps: WebhookRouteDeps): Record<string, Handler> {
  const { endpoints, redeliveries, tenantOf } = deps;
  return {
    async list(req, res) {
      const all = await endpoints.list(tenantOf(req));
      res.json({ object: 'list', data: all.map((e) => webhookObject(viewOf(e))) });
    },
    async create(req, res) {
      const body = parseBody(CreateWebhookRequest, req.body);
      const input = { url: body.url, events: body.events, includeResult: body.include_result };
      const created = await endpoints.create(tenantOf(req), input);
      res.status(201).location(`/lmsp/v1/webhooks/${created.id}`).json(webhookObject(created));
    },
    async read(req, res) {
      res.json(webhookObject(viewOf(await endpoints.get(tenantOf(req), endpointId(req)))));
    },
    async update(req, res) {
      const body = parseBody(UpdateWebhookRequest, req.body);
      const input = {
        url: body.url,
        events: body.events,
        includeResult: body.include_result,
        enabled: body.enabled,
      };
      res.json(webhookObject(await endpoints.update(tenantOf(req), endpointId(req), input)));
    },
    async remove(req, res) {
      await endpoints.delete(tenantOf(req), endpointId(req));
      res.status(204).end();
    },
    async rotate(req, res) {
      res.json(webhookObject(await endpoints.rotate(tenantOf(req), endpointId(req))));
    },
    attempts: (req, res) => attempts(deps, req, res),
    async redeliver(req, res) {
      const body = parseBody(RedeliverRequest, req.body);
      const [tenant, id] = [tenantOf(req), endpointId(req)];
      await endpoints.get(tenant, id);
      const queued =
        'message_id' in body
          ? Number(await redeliveries.one(tenant, id, body.message_id))
          : await redeliveries.range(tenant, id, body.since * 1000, body.until * 1000);
      res.status(202).json({ object: 'webhook_redelivery', queued });
    },
  };
}

export function mountWebhookRoutes(router: Router, deps: WebhookRouteDeps): void {
  const h = handlers(deps);
  const t = (name: string) => translated(h[name]!);
  const routes = express.Router({ caseSensitive: true });
  routes
    .route('/webhooks')
    .get(t('list'))
    .post(t('create'))
    .all(methodNotAllowed(['GET', 'POST']));
  routes
    .route('/webhooks/:id')
    .get(t('read'))
    .patch(t('update'))
    .delete(t('remove'))
    .all(methodNotAllowed(['GET', 'PATCH', 'DELETE']));
  routes
    .route('/webhooks/:id/rotate')
    .post(t('rotate'))
    .all(methodNotAllowed(['POST']));
  routes
    .route('/webhooks/:id/attempts')
    .get(t('attempts'))
    .all(methodNotAllowed(['GET']));
  routes
    .route('/webhooks/:id/redeliver')
    .post(t('redeliver'))
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
