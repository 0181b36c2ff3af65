/**
 * The `/admin/v1` router: the operator gate, then each route's handler (admin-tenants.ts,
 * admin-tasks.ts) and the snapshot feeds (overview, workers) composed under their paths.
 */
import express, { type Request, type Response, type Router } from 'express';
import { OperatorView, TasklineError } from '@taskline/engine';
import { exceptOptions } from '@taskline/auth';
import { LiveTools } from '@taskline/tools';
import { OVERVIEW_INTERVAL_MS, streamsOf, type AdminContext, type ConsoleDeps } from './admin-context.js';
import { cancelTask, followTask, getTask, readWorkers, requeueTask } from './admin-tasks.js';
import { listTenants, listTenantTasks, taskQuery } from './admin-tenants.js';
import { FeedPool, serveFeed, SnapshotFeed } from './live.js';
import { adminOpenApi } from './openapi.js';
import { readOverview } from './overview.js';
import { burnRates } from './slo.js';
import { mountWebhookViews } from './webhooks.js';

type Handler = (ctx: AdminContext, req: Request, res: Response) => Promise<void>;

/**
 * The `/admin/v1` JSON API: every route needs an operator; every answer is `no-store`; a known
 * path asked with another method is 405 with `Allow`, once the operator is known; OPTIONS is 204
 * with `Allow`, without credentials, as on LMSP.
 */
export function adminRouter(deps: ConsoleDeps): Router {
  const ctx: AdminContext = {
    deps,
    view: new OperatorView(deps.store),
    liveTools: new LiveTools(deps.store.redis, { cacheMs: 0 }),
  };
  const router = operatorGate(deps);
  const on = (handler: Handler) => (req: Request, res: Response) => handler(ctx, req, res);
  const get = (path: string, handler: Handler) =>
    router
      .route(path)
      .get(on(handler))
      .all(deps.methodNotAllowed(['GET']));
  const post = (path: string, handler: Handler) =>
    router
      .route(path)
      .post(on(handler))
      .all(deps.methodNotAllowed(['POST']));
  /** A snapshot's two routes: `GET path` reads it once, `GET path/events` follows its feed. */
  const snapshot = (path: string, read: () => Promise<{ at: number }>) => {
    // One read per interval for every operator following the snapshot on this replica.
    const feed = new SnapshotFeed(path.slice(1), read, OVERVIEW_INTERVAL_MS);
    get(path, async (_ctx, _req, res) => void res.json(await read()));
    get(`${path}/events`, (_ctx, req, res) => serveFeed(req, res, feed, deps.live, streamsOf(req)));
  };

  snapshot('/overview', () => readOverview(deps, ctx.view));
  get('/tenants', listTenants);
  get('/tenants/:tenant/tasks', listTenantTasks);
  mountWebhookViews(router, deps.webhooks, deps.methodNotAllowed);
  // The first page, pushed as it changes: one feed per distinct query, shared by its readers.
  const taskFeeds = new FeedPool('tasks', OVERVIEW_INTERVAL_MS);
  get('/tenants/:tenant/tasks/events', async (ctx, req, res) => {
    if (req.query.cursor !== undefined)
      throw new TasklineError('invalid_request', 'The task list stream follows the first page: no cursor.');
    const { key, read } = taskQuery(ctx, req);
    await taskFeeds.serve(req, res, key, read, deps.live, streamsOf(req));
  });
  get('/tasks/:id', getTask);
  get('/tasks/:id/events', followTask);
  post('/tasks/:id/cancel', cancelTask);
  post('/tasks/:id/requeue', requeueTask);
  snapshot('/workers', () => readWorkers(ctx));
  get('/slo', async (_ctx, _req, res) => void res.json(await burnRates(deps.prometheusUrl)));
  const openapi = adminOpenApi();
  get('/openapi.json', async (_ctx, _req, res) => void res.json(openapi));
  return router;
}

/** The router's first steps: an operator (but for OPTIONS), `no-store`, a small JSON body. */
function operatorGate(deps: ConsoleDeps): Router {
  const router = express.Router({ caseSensitive: true });
  router.use(exceptOptions(deps.operators.middleware));
  router.use((_req, res, next) => {
    // One tenant's data must never sit in a cache another request could be answered from.
    res.setHeader('Cache-Control', 'no-store');
    next();
  });
  router.use(express.json({ limit: 1024 }));
  return router;
}
