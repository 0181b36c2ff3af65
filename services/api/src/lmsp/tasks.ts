/**
 * LMSP's task handlers (LMSP 1.0 sections 6 and 7): create, read, cancel and follow a task, and
 * the one create path `POST /responses` shares.
 */
import type { Request, Response } from 'express';
import {
  isWellFormedId,
  notFound,
  servedModel,
  TasklineError,
  type NewTask,
  type OnRestart,
  type TaskRecord,
} from '@taskline/engine';
import { incomingTrace } from '@taskline/tracing';
import type { ApiCore } from '../core.js';
import { tenantOf, type Reservations } from './gate.js';
import {
  API_PREFIX,
  CreateTaskRequest,
  fingerprint,
  idempotencyKeyOf,
  parseBody,
  storedRequest,
  taskObject,
} from './schema.js';
import type { FollowTask } from './stream.js';

/** What every LMSP handler works with. */
export interface LmspContext {
  core: ApiCore;
  followTask: FollowTask;
  reservations: Reservations;
}

/** The caller's task, or the one `404 task_not_found` that a missing, expired or foreign id all get. */
export async function findTask(
  { core }: LmspContext,
  req: Request,
  id = String(req.params.id),
): Promise<TaskRecord> {
  const task = isWellFormedId(id, 'task') ? await core.store.get(id, tenantOf(req)) : null;
  // MCP tool tasks live in the same store; LMSP shows only its own kind.
  if (!task || task.kind !== 'response') throw notFound();
  return task;
}

/**
 * Validates the model and restart policy, then creates the task under the request's place. An
 * idempotent create compares `parsed`, the body as validated, with the key's first request.
 */
export async function createTask(
  { core, reservations }: LmspContext,
  req: Request,
  operation: string,
  request: Parameters<typeof storedRequest>[0],
  onRestart: OnRestart,
  parsed: unknown,
): Promise<TaskRecord> {
  const { store, admission, served } = core;
  const key = idempotencyKeyOf(req.headers['idempotency-key']);
  const model = servedModel(served, request.model);
  if (onRestart === 'resume' && !model.canSnapshot) {
    throw new TasklineError(
      'unsupported_capability',
      `on_restart "resume" needs a backend that can snapshot; "${model.id}" cannot.`,
    );
  }
  const tenant = tenantOf(req);
  const input: NewTask = {
    tenant,
    kind: 'response',
    model: model.id,
    onRestart,
    request: storedRequest(request, served),
  };
  // Only an idempotent create compares requests.
  const print = key ? fingerprint(operation, parsed) : '';
  const { task } = await admission.create(
    tenant,
    reservations.get(req) ?? null,
    async (id, traceparent, alongside) =>
      key
        ? store.createIdempotent({ ...input, id, fresh: true, traceparent }, key, print, alongside)
        : {
            task: await store.create({ ...input, id, fresh: true, traceparent }, alongside),
            replayed: false,
          },
    key ? () => store.findIdempotent(tenant, key, print) : undefined,
    incomingTrace(req.headers),
  );
  // The task's trace id goes back as W3C Trace Context Level 2's `traceresponse` header.
  if (task.traceparent) req.res?.setHeader('traceresponse', task.traceparent);
  return task;
}

export async function postTask(ctx: LmspContext, req: Request, res: Response): Promise<void> {
  const body = parseBody(CreateTaskRequest, req.body);
  // `input.stream` is ignored (LMSP 7.1), so a retry may send another.
  const parsed = { ...body, input: { ...body.input, stream: undefined } };
  const task = await createTask(
    ctx,
    req,
    'POST /lmsp/v1/tasks',
    body.input,
    body.on_restart ?? 'fail',
    parsed,
  );
  res.status(202).location(`${API_PREFIX}/tasks/${task.id}`).json(taskObject(task));
}

export async function getTask(ctx: LmspContext, req: Request, res: Response): Promise<void> {
  res.json(taskObject(await findTask(ctx, req)));
}

export async function cancelTask(ctx: LmspContext, req: Request, res: Response): Promise<void> {
  const task = await findTask(ctx, req);
  const { task: after } = await ctx.core.store.cancel(task.id, task.tenant);
  res.json(taskObject(after));
}

export async function taskEvents(ctx: LmspContext, req: Request, res: Response): Promise<void> {
  await ctx.followTask(
    req,
    res,
    () => findTask(ctx, req),
    (task) => task.tenant,
  );
}
