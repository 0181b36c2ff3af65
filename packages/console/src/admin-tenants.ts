/** The admin API's tenant views: the busiest tenants with their limits, and a tenant's task pages. */
import type { Request, Response } from 'express';
import { isTaskStatus, readyBacklog, TasklineError, type TaskFilter } from '@taskline/engine';
import type { AdminContext } from './admin-context.js';
import { intParam, strParam } from './admin-params.js';

/** Tenants the overview ranks at most (the most recently active): a bounded read however many exist. */
const TENANT_RANK_LIMIT = 1000;

/** `GET /tenants`: the recent tenants, busiest first, a page of them with their counts and limits. */
export async function listTenants(ctx: AdminContext, req: Request, res: Response): Promise<void> {
  const { deps, view } = ctx;
  const q = strParam(req.query.q, 'q', /^[A-Za-z0-9._-]{1,64}$/);
  const offset = intParam(req.query.offset, 'offset', 0, TENANT_RANK_LIMIT, 0);
  const limit = intParam(req.query.limit, 'limit', 1, 100, 20);
  const ranked = await rankTenants(ctx, q);
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
          active_tasks: u.unfinishedTasks,
          max_active_tasks: deps.limits.maxUnfinishedTasks,
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
}

/** The recent tenants whose name holds `q`, with their queued and dispatched work. */
async function rankTenants({ deps, view }: AdminContext, q: string | undefined) {
  const recent = (await view.recentTenants(deps.retentionMs, TENANT_RANK_LIMIT)).filter(
    (t) => !q || t.tenant.includes(q),
  );
  const names = recent.map((t) => t.tenant);
  const [dispatched, backlog] = await Promise.all([view.dispatched(names), readyBacklog(deps.store.redis)]);
  const queued = new Map<string, number>();
  for (const b of backlog) queued.set(b.tenant, (queued.get(b.tenant) ?? 0) + b.depth);
  // Busiest first: the most work waiting or running; ties by the latest create.
  return recent
    .map((t) => ({ ...t, queued: queued.get(t.tenant) ?? 0, dispatched: dispatched.get(t.tenant) ?? 0 }))
    .sort((a, b) => b.queued + b.dispatched - (a.queued + a.dispatched) || b.lastCreateAt - a.lastCreateAt);
}

/** A page of a tenant's tasks as the query asks; `since` is taken when it is read. */
export function taskQuery(
  { view }: AdminContext,
  req: Request,
): { key: string; read: () => Promise<{ at: number } & Record<string, unknown>> } {
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
        tool: r.tool,
        created_at: r.createdAt,
        updated_at: r.updatedAt,
        error_code: r.errorCode,
      })),
      next_cursor: page.next,
    };
  };
  return { key, read };
}

/** `GET /tenants/:tenant/tasks`: one page. */
export async function listTenantTasks(ctx: AdminContext, req: Request, res: Response): Promise<void> {
  res.json(await taskQuery(ctx, req).read());
}
