/** The admin API's task views and actions: any tenant's task, its timeline and events, cancel, requeue. */
import type { Request, Response } from 'express';
import { isWellFormedId, notFound, type TaskRecord } from '@taskline/engine';
import { traceIdOf } from '@taskline/tracing';
import { operatorOf, streamsOf, type AdminContext } from './admin-context.js';

/** Events a task page's timeline reads at most. */
const TIMELINE_READ = 2000;

async function loadTask({ deps }: AdminContext, req: Request): Promise<TaskRecord> {
  const id = String(req.params.id);
  const task = isWellFormedId(id, 'task') ? await deps.store.get(id) : null;
  if (!task) throw notFound();
  return task;
}

/** `GET /tasks/:id`: the record, its timeline and its open input requests. */
export async function getTask(ctx: AdminContext, req: Request, res: Response): Promise<void> {
  const { store } = ctx.deps;
  const task = await loadTask(ctx, req);
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
    task: taskView(task, ctx.deps.traceUrlTemplate),
    timeline,
    timeline_truncated: task.seq > TIMELINE_READ,
    input_requests: inputs,
  });
}

export async function followTask(ctx: AdminContext, req: Request, res: Response): Promise<void> {
  await ctx.deps.followTask(
    req,
    res,
    () => loadTask(ctx, req),
    () => streamsOf(req),
  );
}

export async function cancelTask(ctx: AdminContext, req: Request, res: Response): Promise<void> {
  const task = await loadTask(ctx, req);
  const { outcome, task: after } = await ctx.deps.store.cancel(task.id, null, operatorOf(req));
  res.json({ outcome, task: taskView(after, ctx.deps.traceUrlTemplate) });
}

export async function requeueTask(ctx: AdminContext, req: Request, res: Response): Promise<void> {
  const task = await loadTask(ctx, req);
  const requeued = await ctx.view.requeue(task.id, operatorOf(req));
  res.json({ task: taskView(requeued, ctx.deps.traceUrlTemplate) });
}

/**
 * A task as operators see it: the record, with lease and retry details tenants are not shown, and
 * its trace id (with a link to it when TASKLINE_TRACE_URL_TEMPLATE names the tracing UI).
 */
function taskView(t: TaskRecord, traceUrlTemplate = '') {
  const traceId = traceIdOf(t.traceparent);
  return {
    id: t.id,
    tenant: t.tenant,
    type: t.kind,
    status: t.status,
    model: t.model,
    // A tool task's tool: the built-in tools share the `tools` queue, so the model does not say.
    tool: t.kind === 'tool' ? ((t.request as { tool?: string } | null)?.tool ?? null) : null,
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
    trace_id: traceId,
    trace_url: traceId && traceUrlTemplate ? traceUrlTemplate.replaceAll('{trace_id}', traceId) : null,
  };
}

/** The worker registry as the scheduler last wrote it, and the scheduler leader. */
export async function readWorkers({ view, liveTools }: AdminContext) {
  const [snapshot, leader, toolWorkers] = await Promise.all([
    view.workers(),
    view.leader(),
    liveTools.workers(),
  ]);
  // A tool worker's tools and their versions, from the live tool registry (docs/tools.md).
  const toolsOf = new Map(
    toolWorkers.map((w) => [w.worker, w.tools.map((t) => ({ name: t.name, version: t.version }))]),
  );
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
      tools: toolsOf.get(w.workerId) ?? [],
    })),
  };
}
