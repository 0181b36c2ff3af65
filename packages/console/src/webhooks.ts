/**
 * The console's webhook views under `/admin/v1` (docs/webhooks.md): a tenant's endpoints with
 * their failure counts and newest attempts, enabling one again, redelivering. Never a secret.
 */
import type { RequestHandler, Router } from 'express';
import type { Redis } from 'ioredis';
import { TasklineError } from '@taskline/engine';
import { EndpointError, hookKeys, viewOf, type EndpointStore, type Redeliveries } from '@taskline/webhooks';

export interface WebhookViewDeps {
  redis: Redis;
  endpoints: EndpointStore;
  redeliveries: Redeliveries;
}

/** Attempts shown per endpoint. */
const ATTEMPTS_SHOWN = 20;
const TENANT = /^[A-Za-z0-9._-]{1,64}$/;

const tenantOf = (value: unknown): string => {
  if (typeof value !== 'string' || !TENANT.test(value))
    throw new TasklineError('invalid_request', 'tenant is not valid.');
  return value;
};

/** The endpoint, or `webhook_not_found`; any other failure (Redis unavailable: 503) stays what it is. */
async function endpointOf(deps: WebhookViewDeps, tenant: string, id: string) {
  try {
    return await deps.endpoints.get(tenant, id);
  } catch (err) {
    if (err instanceof EndpointError && err.code === 'webhook_not_found')
      throw new TasklineError('webhook_not_found', `no webhook endpoint ${id} for ${tenant}`);
    throw err;
  }
}

export function mountWebhookViews(
  router: Router,
  deps: WebhookViewDeps,
  methodNotAllowed: (allowed: string[]) => RequestHandler,
): void {
  router
    .route('/tenants/:tenant/webhooks')
    .get(async (req, res) => {
      const tenant = tenantOf(req.params.tenant);
      const all = await deps.endpoints.list(tenant);
      const failures = await deps.redis.hgetall(hookKeys.failures(tenant));
      const data = await Promise.all(
        all.map(async (e) => ({
          ...viewOf(e),
          failures_in_row: Number(failures[e.id] ?? 0),
          attempts: (await deps.redis.lrange(hookKeys.attempts(tenant, e.id), 0, ATTEMPTS_SHOWN - 1)).map(
            (line) => JSON.parse(line) as unknown,
          ),
        })),
      );
      res.json({ tenant, data });
    })
    .all(methodNotAllowed(['GET']));
  router
    .route('/tenants/:tenant/webhooks/:id/enable')
    .post(async (req, res) => {
      const tenant = tenantOf(req.params.tenant);
      await endpointOf(deps, tenant, String(req.params.id));
      res.json(await deps.endpoints.update(tenant, String(req.params.id), { enabled: true }));
    })
    .all(methodNotAllowed(['POST']));
  router
    .route('/tenants/:tenant/webhooks/:id/redeliver')
    .post(async (req, res) => {
      const tenant = tenantOf(req.params.tenant);
      const id = String(req.params.id);
      await endpointOf(deps, tenant, id);
      const since = Number(req.query.since);
      const until = Number(req.query.until ?? Math.floor(Date.now() / 1000));
      if (!Number.isInteger(since) || !Number.isInteger(until) || since < 0 || until < since)
        throw new TasklineError('invalid_request', 'since and until must be Unix seconds, since <= until.');
      res.json({ queued: await deps.redeliveries.range(tenant, id, since * 1000, until * 1000) });
    })
    .all(methodNotAllowed(['POST']));
}
