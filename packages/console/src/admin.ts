import express, { type Request, type RequestHandler, type Response, type Router } from 'express';
import {
  isTaskStatus,
  isWellFormedId,
  notFound,
  OperatorView,
  readyBacklog,
  TasklineError,
  type TaskFilter,
  type TaskRecord,
} from '@taskline/engine';
import { exceptOptions, type OperatorAuthenticator } from '@taskline/auth';
import { FeedPool, serveFeed, SnapshotFeed, type LiveStreams } from './live.js';
import { adminOpenApi } from './openapi.js';
import { readOverview, type OverviewDeps } from './overview.js';
import { burnRates } from './slo.js';
import { mountWebhookViews, type WebhookViewDeps } from './webhooks.js';

/** What the console reads besides the engine: the api's limits and its event streams. */
export interface ConsoleDeps extends OverviewDeps {
  operators: OperatorAuthenticator;
  /** The api's task event stream (LMSP resume rules); open streams count under `streamsOf`. */
  followTask(
    req: Request,
    res: Response,
    load: () => Promise<TaskRecord>,
    streamsOf: (task: TaskRecord) => string,
  ): Promise<void>;
  /** The overview's stream: the api's stream cap, shutdown and SSE settings. */
  live: LiveStreams;
  /** Each tenant's use of its limits now, with the entries of its unfinished-task cap. */
  usage(
    tenants: string[],
  ): Promise<Map<string, { activeTasks: number; unfinished: string[]; streams: number; rateTokens: number }>>;
  limits: { maxActiveTasks: number; maxStreams: number; requestBurst: number };
  /** Tenants with a create within this long are listed (the task retention). */
  retentionMs: number;
  /** The api's answer to a known path asked with another method: 405 with `Allow` (OPTIONS 204), as on LMSP. */
  methodNotAllowed(allowed: string[]): RequestHandler;
  /** Tenants' webhook endpoints (docs/webhooks.md). */
  webhooks: WebhookViewDeps;
}

/** Tenants the overview ranks at most (the most recently active): a bounded read however many exist. */
const TENANT_RANK_LIMIT = 1000;
/** How often the overview, workers and task list streams send a snapshot. */
const OVERVIEW_INTERVAL_MS = 2000;
/** Events a task page's timeline reads at most. */
const TIMELINE_READ = 2000;

const intParam = (value: unknown, name: string, min: number, max: number, fallback: number): number => {
  if (value === undefined || value === '') return fallback;
  // Decimal digits only, as resume points are: Number() would also take '1e2', '0x10' or ' 5'.
  const n = typeof value === 'string' && /^(0|[1-9][0-9]{0,14})$/.test(value) ? Number(value) : NaN;
  if (!(n >= min && n <= max))
    throw new TasklineError('invalid_request', `${name} must be an integer from ${min} to ${max}.`);
  return n;
};

const strParam = (value: unknown, name: string, pattern: RegExp): string | undefined => {
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string' || !pattern.test(value))
    throw new TasklineError('invalid_request', `${name} is not valid.`);
  return value;
};

/**
 * The `/admin/v1` JSON API: every route needs an operator; every answer is `no-store`; a known
 * path asked with another method is 405 with `Allow`, once the operator is known; OPTIONS is 204
 * with `Allow`, without credentials, as on LMSP.
 */
export function adminRouter(deps: ConsoleDeps): Router {
  const { store } = deps;
  const view = new OperatorView(store);
  const router = express.Router({ caseSensitive: true });
  router.use(exceptOptions(deps.operators.middleware));
  router.use((_req, res, next) => {
    // One tenant's data must never sit in a cache another request could be answered from.
    res.setHeader('Cache-Control', 'no-store');
    next();
  });
  router.use(express.json({ limit: 1024 }));

  const loadTask = async (req: Request): Promise<TaskRecord> => {
    const id = String(req.params.id);
    const task = isWellFormedId(id, 'task') ? await store.get(id) : null;
    if (!task) throw notFound();
    return task;
  };
  const operatorOf = (req: Request) => req.operator!.id;
  // An operator's streams count under a name no tenant can have (":"), never a tenant's cap.
  const streamsOf = (req: Request) => `console:${operatorOf(req)}`;

  const overview = () => readOverview(deps, view);
  // One read per interval for every operator following the overview on this replica.
  /** A snapshot's two routes: `GET path` reads it once, `GET path/events` follows its feed. */
  const snapshotRoutes = (path: string, read: () => Promise<unknown>, feed: SnapshotFeed) => {
    router
      .route(path)
      .get(async (_req, res) => {
        res.json(await read());
      })
      .all(deps.methodNotAllowed(['GET']));
    router
      .route(`${path}/events`)
      .get(async (req, res) => {
        await serveFeed(req, res, feed, deps.live, streamsOf(req));
      })
      .all(deps.methodNotAllowed(['GET']));
  };
  snapshotRoutes('/overview', overview, new SnapshotFeed('overview', overview, OVERVIEW_INTERVAL_MS));

  router
    .route('/tenants')
    .get(async (req, res) => {
      const q = strParam(req.query.q, 'q', /^[A-Za-z0-9._-]{1,64}$/);
      const offset = intParam(req.query.offset, 'offset', 0, TENANT_RANK_LIMIT, 0);
      const limit = intParam(req.query.limit, 'limit', 1, 100, 20);
      const recent = (await view.recentTenants(deps.retentionMs, TENANT_RANK_LIMIT)).filter(
        (t) => !q || t.tenant.includes(q),
      );
      const names = recent.map((t) => t.tenant);
      const [dispatched, backlog] = await Promise.all([view.dispatched(names), readyBacklog(store.redis)]);
      const queued = new Map<string, number>();
      for (const b of backlog) queued.set(b.tenant, (queued.get(b.tenant) ?? 0) + b.depth);
      // Busiest first: the most work waiting or running; ties by the latest create.
      const ranked = recent
        .map((t) => ({ ...t, queued: queued.get(t.tenant) ?? 0, dispatched: dispatched.get(t.tenant) ?? 0 }))
        .sort(
          (a, b) => b.queued + b.dispatched - (a.queued + a.dispatched) || b.lastCreateAt - a.lastCreateAt,
        );
      const page = ranked.slice(offset, offset + limit);
      const usage = await deps.usage(page.map((t) => t.tenant));
      const summaries = await Promise.all(
        page.map((t) => view.tenantCounts(t.tenant, usage.get(t.tenant)!.unfinished)),
      );
      res.json({
        data: page.map((t, i) => {
          const u = usage.get(t.tenant)!;
          return {
            tenant: t.tenant,
            last_create_at: t.lastCreateAt,
            queued: t.queued,
            dispatched: t.dispatched,
            // Exact: every unfinished task by status, and the last hour's failures by code.
            unfinished: summaries[i]!.statuses,
            failures_last_hour: summaries[i]!.failures,
            limits: {
              active_tasks: u.activeTasks,
              max_active_tasks: deps.limits.maxActiveTasks,
              open_streams: u.streams,
              max_streams: deps.limits.maxStreams,
              request_tokens: u.rateTokens,
              request_burst: deps.limits.requestBurst,
            },
          };
        }),
        total: ranked.length,
        offset,
        limit,
      });
    })
    .all(deps.methodNotAllowed(['GET']));

  /** A page of a tenant's tasks as the query asks; `since` is taken when it is read. */
  const taskQuery = (req: Request) => {
    const tenant = strParam(req.params.tenant, 'tenant', /^[A-Za-z0-9._-]{1,64}$/)!;
    const status = req.query.status;
    if (status !== undefined && status !== '' && !isTaskStatus(status))
      throw new TasklineError('invalid_request', 'status is not a task status.');
    const kind = strParam(req.query.type, 'type', /^(response|tool)$/) as TaskFilter['kind'];
    const model = strParam(req.query.model, 'model', /^[^\s]{1,128}$/);
    const maxAge = intParam(req.query.max_age_s, 'max_age_s', 1, 365 * 86400, 0);
    const limit = intParam(req.query.limit, 'limit', 1, 200, 50);
    const cursor = strParam(req.query.cursor, 'cursor', /^\d{1,16}:\d{1,9}$/);
    const key = JSON.stringify([tenant, status, kind, model, maxAge, limit]);
    const read = async () => {
      const filter: TaskFilter = {
        ...(status ? { status } : {}),
        ...(kind ? { kind } : {}),
        ...(model ? { model } : {}),
        ...(maxAge ? { since: Date.now() - maxAge * 1000 } : {}),
      };
      const page = await view.tasks(tenant, filter, limit, cursor);
      return {
        at: Date.now(),
        data: page.rows.map((r) => ({
          id: r.id,
          type: r.kind,
          status: r.status,
          model: r.model,
          created_at: r.createdAt,
          updated_at: r.updatedAt,
          error_code: r.errorCode,
        })),
        next_cursor: page.next,
      };
    };
    return { key, read };
  };
  mountWebhookViews(router, deps.webhooks, deps.methodNotAllowed);
  router
    .route('/tenants/:tenant/tasks')
    .get(async (req, res) => {
      res.json(await taskQuery(req).read());
    })
    .all(deps.methodNotAllowed(['GET']));
  // The first page, pushed as it changes: one feed per distinct query, shared by its readers.
  const taskFeeds = new FeedPool('tasks', OVERVIEW_INTERVAL_MS);
  router
    .route('/tenants/:tenant/tasks/events')
    .get(async (req, res) => {
      if (req.query.cursor !== undefined)
        throw new TasklineError('invalid_request', 'The task list stream follows the first page: no cursor.');
      const { key, read } = taskQuery(req);
      await taskFeeds.serve(req, res, key, read, deps.live, streamsOf(req));
    })
    .all(deps.methodNotAllowed(['GET']));

  router
    .route('/tasks/:id')
    .get(async (req, res) => {
      const task = await loadTask(req);
      const [inputs, { events }] = await Promise.all([
        store.openInputRequests(task.id),
        store.events(task.id, 0, TIMELINE_READ),
      ]);
      // The timeline: every event that says a state (output deltas carry none of their own).
      const timeline = events.flatMap((e) => {
        const data = JSON.parse(e.data) as Record<string, unknown>;
        if (typeof data.task_status !== 'string' || e.type.includes('.delta')) return [];
        return [
          {
            sequence_number: e.seq,
            type: e.type,
            status: data.task_status,
            ...(data.reason ? { reason: data.reason } : {}),
            ...(data.worker ? { worker: data.worker } : {}),
            ...(data.operator_action ? { operator_action: data.operator_action } : {}),
          },
        ];
      });
      res.json({
        task: taskView(task),
        timeline,
        timeline_truncated: task.seq > TIMELINE_READ,
        input_requests: inputs,
      });
    })
    .all(deps.methodNotAllowed(['GET']));

  router
    .route('/tasks/:id/events')
    .get(async (req, res) => {
      await deps.followTask(
        req,
        res,
        () => loadTask(req),
        () => streamsOf(req),
      );
    })
    .all(deps.methodNotAllowed(['GET']));

  router
    .route('/tasks/:id/cancel')
    .post(async (req, res) => {
      const task = await loadTask(req);
      const { outcome, task: after } = await store.cancel(task.id, null, operatorOf(req));
      res.json({ outcome, task: taskView(after) });
    })
    .all(deps.methodNotAllowed(['POST']));

  router
    .route('/tasks/:id/requeue')
    .post(async (req, res) => {
      const task = await loadTask(req);
      res.json({ task: taskView(await view.requeue(task.id, operatorOf(req))) });
    })
    .all(deps.methodNotAllowed(['POST']));

  const workers = async () => {
    const [snapshot, leader] = await Promise.all([view.workers(), view.leader()]);
    return {
      at: Date.now(),
      leader,
      reported_by: snapshot?.scheduler ?? null,
      reported_at: snapshot?.at ?? null,
      workers: (snapshot?.workers ?? []).map((w) => ({
        worker_id: w.workerId,
        models: w.models,
        draining: w.draining,
        last_heartbeat_at: w.lastSeen,
        // A scheduler of an older build reports none.
        lease_renewals: w.leaseRenewals ?? 0,
      })),
    };
  };
  snapshotRoutes('/workers', workers, new SnapshotFeed('workers', workers, OVERVIEW_INTERVAL_MS));

  router
    .route('/slo')
    .get(async (_req, res) => {
      res.json(await burnRates(deps.prometheusUrl));
    })
    .all(deps.methodNotAllowed(['GET']));

  const openapi = adminOpenApi();
  router
    .route('/openapi.json')
    .get((_req, res) => {
      res.json(openapi);
    })
    .all(deps.methodNotAllowed(['GET']));
  return router;
}

/** A task as operators see it: the record, with lease and retry details tenants are not shown. */
function taskView(t: TaskRecord) {
  return {
    id: t.id,
    tenant: t.tenant,
    type: t.kind,
    status: t.status,
    model: t.model,
    attempt: t.attempt,
    seq: t.seq,
    on_restart: t.onRestart,
    // The tenant's own value, shown here only: LMSP and MCP never return it to anyone.
    idempotency_key: t.idempotencyKey,
    lease_owner: t.leaseOwner,
    lease_until: t.leaseUntil,
    created_at: t.createdAt,
    updated_at: t.updatedAt,
    ended_at: t.endedAt,
    expires_at: t.expiresAt,
    status_message: t.statusMessage,
    error: t.error,
    request: t.request,
  };
}
