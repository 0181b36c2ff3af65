/**
 * The LMSP 1.0 routes under `/lmsp/v1` (tasks, responses, event streams, discovery; LMSP 1.0
 * sections 6, 7 and 9), with the OpenAI Responses API's background routes on the same tasks.
 * Every request goes through the one admission path (`@taskline/admission`) before its handler.
 */
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { callerLeft, type StreamSlot, type TaskReservation } from '@taskline/admission';
import { exceptOptions } from '@taskline/auth';
import {
  DURABILITY_LOSS,
  isWellFormedId,
  notFound,
  servedModel,
  TasklineError,
  type NewTask,
  type OnRestart,
  type TaskRecord,
} from '@taskline/engine';
import type { ApiCore } from '../core.js';
import { OPENAI_STREAM_ENDS } from '../openai/events.js';
import { answerInBackground, mountResponseRoutes } from '../openai/routes.js';
import { methodNotAllowed } from '../problem.js';
import { streamTaskEvents } from '../sse.js';
import { buildOpenApi } from './openapi.js';
import {
  API_PREFIX,
  CreateTaskRequest,
  fingerprint,
  fieldError,
  idempotencyKeyOf,
  LMSP_VERSION,
  modelObject,
  parseBody,
  responseObject,
  ResponseRequest,
  resumePoint,
  storedRequest,
  taskObject,
} from './schema.js';
import { checkResumable, streamOptions, type FollowTask } from './stream.js';
import { mountWebhookRoutes } from './webhooks.js';
import { mountAnswerLinks } from './answer-links.js';

/** LMSP routes that create a task (paths inside the LMSP router). */
const CREATE_PATHS = new Set(['/tasks', '/responses']);

/** The operation an idempotent `POST /responses` is fingerprinted under. */
const RESPONSES_OPERATION = 'POST /lmsp/v1/responses';

function tenantOf(req: Request): string {
  if (!req.tenant) throw new TasklineError('unauthorized', 'This request is not authenticated.');
  return req.tenant.id;
}

function requireJson(req: Request, _res: Response, next: NextFunction): void {
  if (!req.is('application/json')) {
    next(
      new TasklineError('invalid_request', 'The request needs a JSON body (Content-Type: application/json).'),
    );
  } else next();
}

export function lmspRouter(core: ApiCore, followTask: FollowTask): Router {
  const { env, store, admission, served } = core;
  const models = served.models;
  const openapi = buildOpenApi();
  /** Creates' places under the tenant's unfinished-task cap, taken with their rate-limit token. */
  const reservations = new WeakMap<Request, TaskReservation>();
  /** Each request's admission, asked for as it arrives and awaited once its body is read. */
  const decisions = new WeakMap<Request, Promise<void>>();

  function admit(req: Request, res: Response, next: NextFunction): void {
    const creates = req.method === 'POST' && CREATE_PATHS.has(req.path);
    const decision = admission.admit(tenantOf(req), res, creates).then((slot) => {
      if (slot) reservations.set(req, slot);
    });
    decision.catch(() => undefined); // handled below, once the body is read
    decisions.set(req, decision);
    next();
  }

  // The body is read while the bucket answers (one round trip saved), but the bucket speaks
  // first: an over-limit request gets its 429 whatever its body, as if nothing had been read.
  function admitted(req: Request, _res: Response, next: NextFunction): void {
    decisions.get(req)!.then(() => next(), next);
  }

  function admittedOnError(err: unknown, req: Request, _res: Response, next: NextFunction): void {
    // Refused before the limits were asked (authentication): that error stands.
    const decision = decisions.get(req);
    if (!decision) return next(err);
    decision.then(() => next(err), next);
  }

  /** Counts create requests by outcome: 2xx accepted, 4xx rejected (validation, limits), 5xx error. */
  function countCreate(req: Request, res: Response, next: NextFunction): void {
    const { metrics } = core;
    if (metrics) {
      res.once('close', () => {
        const outcome = res.statusCode < 400 ? 'accepted' : res.statusCode < 500 ? 'rejected' : 'error';
        const tenant = req.tenant ? metrics.tenant(req.tenant.id) : 'unauthenticated';
        metrics.taskCreatesTotal.inc({ protocol: 'lmsp', tenant, outcome });
      });
    }
    next();
  }

  /** The caller's task, or the one `404 task_not_found` that a missing, expired or foreign id all get. */
  async function findTask(req: Request, id = String(req.params.id)): Promise<TaskRecord> {
    const task = isWellFormedId(id, 'task') ? await store.get(id, tenantOf(req)) : null;
    // MCP tool tasks live in the same store; LMSP shows only its own kind.
    if (!task || task.kind !== 'response') throw notFound();
    return task;
  }

  /**
   * Validates the model and restart policy, then creates the task under the request's place. An
   * idempotent create compares `parsed`, the body as validated, with the key's first request.
   */
  async function createTask(
    req: Request,
    operation: string,
    request: Parameters<typeof storedRequest>[0],
    onRestart: OnRestart,
    parsed: unknown,
  ): Promise<TaskRecord> {
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
      async (id) =>
        key
          ? store.createIdempotent({ ...input, id, fresh: true }, key, print)
          : { task: await store.create({ ...input, id, fresh: true }), replayed: false },
      key ? () => store.findIdempotent(tenant, key, print) : undefined,
    );
    return task;
  }

  async function postTask(req: Request, res: Response): Promise<void> {
    const body = parseBody(CreateTaskRequest, req.body);
    // `input.stream` is ignored (LMSP 7.1), so a retry may send another.
    const parsed = { ...body, input: { ...body.input, stream: undefined } };
    const task = await createTask(req, 'POST /lmsp/v1/tasks', body.input, body.on_restart ?? 'fail', parsed);
    res.status(202).location(`${API_PREFIX}/tasks/${task.id}`).json(taskObject(task));
  }

  async function getTask(req: Request, res: Response): Promise<void> {
    res.json(taskObject(await findTask(req)));
  }

  async function cancelTask(req: Request, res: Response): Promise<void> {
    const task = await findTask(req);
    const { task: after } = await store.cancel(task.id, task.tenant);
    res.json(taskObject(after));
  }

  async function taskEvents(req: Request, res: Response): Promise<void> {
    await followTask(
      req,
      res,
      () => findTask(req),
      (task) => task.tenant,
    );
  }

  /**
   * `POST /responses`: in the background, a task like any other; otherwise the caller holds the
   * response (streamed, or answered once it ends), and one that leaves first cancels it, unless
   * it sent an Idempotency-Key: then it will retry with it, and the retry gets the finished
   * response (or the whole stream).
   */
  async function postResponse(req: Request, res: Response): Promise<void> {
    const body = parseBody(ResponseRequest, req.body);
    if (body.background && body.store === false)
      throw fieldError(
        'store',
        'false with background: true; background mode keeps the response to be retrieved, send store: true or leave it out.',
      );
    // What can refuse the answer is asked before the task exists, so a refusal leaves nothing
    // behind (an SDK retrying a 429 would otherwise make a task per try): the resume point of a
    // background stream, then the stream's slot under the tenant's cap.
    const after =
      body.background && body.stream
        ? resumePoint(req.headers['last-event-id'], req.query.starting_after)
        : 0;
    if (after > 1) await checkReplayResumable(req, body, after);
    const slot = body.stream ? await core.limits.openStream(tenantOf(req)) : undefined;
    let task: TaskRecord;
    try {
      task = await createTask(req, RESPONSES_OPERATION, body, 'fail', body);
    } catch (err) {
      await slot?.release().catch(() => undefined);
      throw err;
    }
    const keyed = idempotencyKeyOf(req.headers['idempotency-key']) !== null;
    try {
      await answerResponse(req, res, task, body, after, slot, keyed);
    } catch (err) {
      // Released twice at worst, when the stream itself had already let it go.
      await slot?.release().catch(() => undefined);
      // A caller answered with an error holds no handle on the task; with a key, its retry finds it.
      if (!keyed && !res.headersSent) await store.cancel(task.id, task.tenant).catch(() => undefined);
      throw err;
    }
  }

  /**
   * A resume point past a background stream's first event names events of the response an
   * earlier create with the same Idempotency-Key made: checked against that response before
   * anything is created, as a new one has only its `response.created` (event 1) to resume from.
   */
  async function checkReplayResumable(req: Request, body: ResponseRequest, after: number): Promise<void> {
    const key = idempotencyKeyOf(req.headers['idempotency-key']);
    const earlier = key
      ? await store.findIdempotent(tenantOf(req), key, fingerprint(RESPONSES_OPERATION, body))
      : null;
    checkResumable(earlier ?? { seq: 1 }, after);
  }

  async function answerResponse(
    req: Request,
    res: Response,
    task: TaskRecord,
    body: ResponseRequest,
    after: number,
    slot: StreamSlot | undefined,
    keyed: boolean,
  ): Promise<void> {
    if (body.background && !body.stream) return answerInBackground(res, task);
    if (body.background) {
      checkResumable(task, after);
      const options = streamOptions(core, req, task, after, 'events');
      return streamTaskEvents(req, res, { ...options, slot, ...OPENAI_STREAM_ENDS });
    }
    const left = callerLeft(res);
    const stop = keyed ? null : admission.cancelOnLeave(task, left);
    if (body.stream) {
      const options = streamOptions(core, req, task, 0, 'response');
      // Never cut by a shutdown (left to finish), but cut for a slow reader, which resumes by id.
      // The stream's end (whole, or cut for a slow reader, who resumes by id) ends the call's hold;
      // a caller who left first has cancelled the task (callerLeft listened before this).
      if (res.closed) stop?.();
      else res.once('close', () => stop?.());
      await streamTaskEvents(req, res, { ...options, slot, ...OPENAI_STREAM_ENDS });
      return;
    }
    let ended: TaskRecord | null;
    try {
      ended = await admission.awaitEnd(task, left);
    } catch (err) {
      if (left.aborted) return;
      throw err;
    } finally {
      stop?.();
    }
    if (!ended) throw notFound();
    res.json(responseObject(ended));
  }

  function capabilities(_req: Request, res: Response): void {
    const all = [...models.values()];
    res.json({
      object: 'capabilities',
      lmsp_version: LMSP_VERSION,
      event_resume: true,
      task_types: ['response'],
      on_restart: all.some((m) => m.canSnapshot) ? ['fail', 'retry', 'resume'] : ['fail', 'retry'],
      models: all.map((m) => m.id),
      resume_models: all.filter((m) => m.canSnapshot).map((m) => m.id),
      retention: {
        task_seconds: env.TASKLINE_TASK_RETENTION_S,
        event_seconds: env.TASKLINE_EVENT_RETENTION_S,
        idempotency_key_seconds: env.TASKLINE_IDEMPOTENCY_TTL_S,
      },
      limits: {
        max_body_bytes: env.TASKLINE_MAX_BODY_BYTES,
        max_output_tokens: env.TASKLINE_MAX_OUTPUT_TOKENS,
        requests_per_second: env.TASKLINE_RATE_LIMIT_PER_S,
        request_burst: env.TASKLINE_RATE_LIMIT_BURST,
        max_active_tasks: env.TASKLINE_MAX_ACTIVE_TASKS,
        max_open_streams: env.TASKLINE_MAX_STREAMS,
      },
      heartbeat_seconds: env.TASKLINE_SSE_HEARTBEAT_MS / 1000,
      durability: {
        level: env.TASKLINE_DURABILITY,
        crash_may_lose: DURABILITY_LOSS[env.TASKLINE_DURABILITY],
        replica_ack_timeout_ms: env.TASKLINE_REPLICA_ACK_TIMEOUT_MS,
      },
    });
  }

  function listModels(_req: Request, res: Response): void {
    res.json({ object: 'list', data: [...models.values()].map(modelObject) });
  }

  /** One served model (OpenAI's `models.retrieve`); any other id is `model_not_found`. */
  function getModel(req: Request, res: Response): void {
    res.json(modelObject(servedModel(served, String(req.params.id))));
  }

  const router = express.Router({ caseSensitive: true });
  // Without credentials: API explorers and client generators fetch the document anonymously.
  router
    .route('/openapi.json')
    .get((_req, res) => void res.json(openapi))
    .all(methodNotAllowed(['GET']));
  // The signed token is the credential: no API key, no tenant limits (docs/webhooks.md).
  mountAnswerLinks(router, { redis: core.redis, store, links: core.webhooks.links });
  // Authentication, admission and the body, for every method but OPTIONS (`exceptOptions`).
  const gate = express.Router();
  gate.use(core.auth.middleware, admit);
  gate.use(express.json({ limit: env.TASKLINE_MAX_BODY_BYTES, strict: true }));
  gate.use(admitted, admittedOnError);
  router.use(exceptOptions(gate));
  router
    .route('/tasks')
    .post(countCreate, requireJson, postTask)
    .all(methodNotAllowed(['POST']));
  router
    .route('/tasks/:id')
    .get(getTask)
    .all(methodNotAllowed(['GET']));
  router
    .route('/tasks/:id/cancel')
    .post(cancelTask)
    .all(methodNotAllowed(['POST']));
  router
    .route('/tasks/:id/events')
    .get(taskEvents)
    .all(methodNotAllowed(['GET']));
  router
    .route('/responses')
    .post(countCreate, requireJson, postResponse)
    .all(methodNotAllowed(['POST']));
  mountResponseRoutes(router, { store, findTask, followTask });
  mountWebhookRoutes(router, { redis: core.redis, ...core.webhooks, tenantOf });
  router
    .route('/capabilities')
    .get(capabilities)
    .all(methodNotAllowed(['GET']));
  router
    .route('/models')
    .get(listModels)
    .all(methodNotAllowed(['GET']));
  router
    .route('/models/:id')
    .get(getModel)
    .all(methodNotAllowed(['GET']));
  return router;
}
