import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import type { Redis } from 'ioredis';
import { authenticator } from '@taskline/auth';
import type { Env } from '@taskline/config';
import {
  DURABILITY_LOSS,
  EventHub,
  isFinalEventType,
  isWellFormedId,
  newId,
  notFound,
  servedModel,
  servedModelsFromEnv,
  storeOptionsFromEnv,
  TaskStore,
  TasklineError,
  type NewTask,
  type OnRestart,
  type TaskRecord,
} from '@taskline/engine';
import type { Logger } from '@taskline/log';
import { httpMetrics, type TasklineMetrics } from '@taskline/metrics';
import { TenantLimits, type TaskReservation } from './limits.js';
import { buildOpenApi } from './lmsp/openapi.js';
import {
  API_PREFIX,
  CreateTaskRequest,
  fingerprint,
  idempotencyKeyOf,
  LMSP_VERSION,
  modelObject,
  parseBody,
  responseObject,
  ResponseRequest,
  resumePoint,
  storedRequest,
  taskObject,
} from './lmsp/schema.js';
import { answerInBackground, mountResponseRoutes } from './openai/routes.js';
import type { TasklineApi } from './types.js';
import { errorHandler, methodNotAllowed, routeNotFound, sendProblem } from './problem.js';
import { StreamRegistry, streamTaskEvents } from './sse.js';

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** Echoed as `X-Request-Id` and written on every log line of the request. */
      id: string;
    }
  }
}

export interface AppDeps {
  env: Env;
  /** Commands (tasks, keys, limits). */
  redis: Redis;
  logger: Logger;
  /**
   * Prometheus metrics (`@taskline/metrics`), counted here; they are served by the metrics
   * listener of `main.ts` (`TASKLINE_METRICS_PORT`), never on the port clients reach: they name
   * the busiest tenants.
   */
  metrics?: TasklineMetrics;
  /** Mounts other surfaces on the same app, after auth is built and before the final 404 (MCP at `/mcp`). */
  mountExtra?: (app: Express, api: Omit<TasklineApi, 'app'>) => void;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
/** LMSP routes that create a task (paths inside the LMSP router). */
const CREATE_PATHS = new Set(['/tasks', '/responses']);

/** Builds the Express 5 app of the `api` service: LMSP 1.0 under `/lmsp/v1`, health, and the mount spot for MCP. */
export function createApp(deps: AppDeps): TasklineApi {
  const { env, redis, logger } = deps;
  const store = new TaskStore(redis, {
    ...storeOptionsFromEnv(env),
    replicaAckTimeoutMs: env.TASKLINE_REPLICA_ACK_TIMEOUT_MS,
    onTransition: deps.metrics?.transitioned,
  });
  const hub = new EventHub(store);
  const auth = authenticator(env, redis);
  const limits = new TenantLimits(redis, {
    ratePerS: env.TASKLINE_RATE_LIMIT_PER_S,
    burst: env.TASKLINE_RATE_LIMIT_BURST,
    maxActiveTasks: env.TASKLINE_MAX_ACTIVE_TASKS,
    maxStreams: env.TASKLINE_MAX_STREAMS,
    streamLeaseMs: env.TASKLINE_SSE_HEARTBEAT_MS * 3,
  });
  const streams = new StreamRegistry();
  const served = servedModelsFromEnv(env);
  const models = served.models;
  const openapi = buildOpenApi();
  const cancels = new Set<Promise<unknown>>();
  let draining = false;
  let inFlight = 0;

  const app = express();
  app.disable('x-powered-by');
  // Task objects change under the same URL; a body hash as validator buys nothing.
  app.set('etag', false);

  app.use((req, res, next) => {
    const given = req.headers['x-request-id'];
    req.id = typeof given === 'string' && REQUEST_ID.test(given) ? given : newId('req');
    res.setHeader('X-Request-Id', req.id);
    if (draining) res.setHeader('Connection', 'close');
    const started = process.hrtime.bigint();
    inFlight++;
    res.once('close', () => {
      inFlight--;
      logger.info('request', {
        request_id: req.id,
        method: req.method,
        path: req.path,
        status: res.statusCode,
        tenant: req.tenant?.id,
        ms: Number((process.hrtime.bigint() - started) / 1000n) / 1000,
        aborted: !res.writableFinished,
      });
    });
    next();
  });

  if (deps.metrics) app.use(httpMetrics(deps.metrics));

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', async (_req, res) => {
    if (draining) return sendProblem(res, 'unavailable', 'This replica is shutting down.');
    const ok = await Promise.race([
      redis.ping().then(
        () => true,
        () => false,
      ),
      new Promise<boolean>((r) => setTimeout(r, 1000, false).unref()),
    ]);
    if (ok) res.json({ status: 'ok' });
    else sendProblem(res, 'unavailable', 'Redis is unreachable.');
  });

  const lmsp = express.Router();
  lmsp.use(auth.middleware);
  /** Creates' places under the tenant's unfinished-task cap, taken with their rate-limit token. */
  const reservations = new WeakMap<Request, TaskReservation>();
  /** Each request's rate-limit decision, asked for as it arrives and awaited once its body is read. */
  const decisions = new WeakMap<Request, Promise<void>>();
  lmsp.use((req, res, next) => {
    const tenant = tenantOf(req);
    let decision: Promise<void>;
    if (req.method === 'POST' && CREATE_PATHS.has(req.path)) {
      const taking = limits.takeCreate(tenant);
      // Refused before the create (bad body, unknown model) or cut short: free the place. Listened
      // for now, not once the place is held: a caller gone by then would leave it for 60 s.
      res.once('close', () => void taking.then((slot) => slot.commit(null)).catch(() => undefined));
      decision = taking.then((slot) => void reservations.set(req, slot));
    } else decision = limits.takeRequest(tenant);
    decision.catch(() => undefined); // handled below, once the body is read
    decisions.set(req, decision);
    next();
  });
  lmsp.use(express.json({ limit: env.TASKLINE_MAX_BODY_BYTES, strict: true }));
  // The body is read while the bucket answers (one round trip saved), but the bucket speaks
  // first: an over-limit request gets its 429 whatever its body, as if nothing had been read.
  lmsp.use((req: Request, _res: Response, next: NextFunction) => {
    decisions.get(req)!.then(() => next(), next);
  });
  lmsp.use((err: unknown, req: Request, _res: Response, next: NextFunction) => {
    // Refused before the limits were asked (authentication): that error stands.
    const decision = decisions.get(req);
    if (!decision) return next(err);
    decision.then(() => next(err), next);
  });

  /** Counts create requests by outcome: 2xx accepted, 4xx rejected (validation, limits), 5xx error. */
  const countCreate = (req: Request, res: Response, next: NextFunction) => {
    const { metrics } = deps;
    if (metrics) {
      res.once('close', () => {
        const outcome = res.statusCode < 400 ? 'accepted' : res.statusCode < 500 ? 'rejected' : 'error';
        const tenant = req.tenant ? metrics.tenant(req.tenant.id) : 'unauthenticated';
        metrics.taskCreatesTotal.inc({ protocol: 'lmsp', tenant, outcome });
      });
    }
    next();
  };

  const requireJson = (req: Request, _res: Response, next: NextFunction) => {
    if (!req.is('application/json')) {
      next(
        new TasklineError(
          'invalid_request',
          'The request needs a JSON body (Content-Type: application/json).',
        ),
      );
    } else next();
  };

  /** The caller's task, or the one `404 task_not_found` that a missing, expired or foreign id all get. */
  const findTask = async (req: Request, id = String(req.params.id)): Promise<TaskRecord> => {
    const task = isWellFormedId(id, 'task') ? await store.get(id, tenantOf(req)) : null;
    // MCP tool tasks live in the same store; LMSP shows only its own kind.
    if (!task || task.kind !== 'response') throw notFound();
    return task;
  };

  /** Validates the model and restart policy, holds a slot under the tenant's cap, then persists the task. */
  const createTask = async (
    req: Request,
    operation: string,
    request: Parameters<typeof storedRequest>[0],
    onRestart: OnRestart,
  ): Promise<{ task: TaskRecord; replayed: boolean }> => {
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
    const print = key ? fingerprint(operation, req.body) : '';
    const slot = reservations.get(req) ?? (await limits.reserveTask(tenant));
    try {
      await slot.admit();
    } catch (err) {
      // A retry of a create that was accepted gets its task again, even at the tenant's cap.
      const replay =
        key && err instanceof TasklineError ? await store.findIdempotent(tenant, key, print) : null;
      if (!replay) throw err;
      await slot.commit(null).catch(() => undefined);
      return { task: replay, replayed: true };
    }
    try {
      const created = key
        ? await store.createIdempotent(input, key, print)
        : { task: await store.create(input), replayed: false };
      // Not awaited: until the swap lands the reservation counts in the task's place, and a
      // failed swap leaves a reservation that ages out; the task itself is already on disk.
      slot
        .commit(created.replayed ? null : created.task.id)
        .catch((err: unknown) =>
          logger.warn('task reservation commit failed', { task: created.task.id, err }),
        );
      return created;
    } catch (err) {
      await slot.commit(null).catch(() => undefined);
      throw err;
    }
  };

  /** Cancels a response whose caller left; tracked so shutdown waits for the write. */
  const cancelForGoneClient = (task: TaskRecord) => {
    const p = store
      .cancel(task.id, task.tenant)
      .catch((err) => {
        if (!(err instanceof TasklineError && err.code === 'task_not_cancelable')) {
          logger.warn('cancel after disconnect failed', { task: task.id, err });
        }
      })
      .finally(() => cancels.delete(p));
    cancels.add(p);
  };

  const streamOptions = (req: Request, task: TaskRecord, after: number, kind: 'events' | 'response') => ({
    hub,
    limits,
    streams,
    logger: logger.child({ request_id: req.id }),
    heartbeatMs: env.TASKLINE_SSE_HEARTBEAT_MS,
    maxBufferBytes: env.TASKLINE_SSE_MAX_BUFFER_BYTES,
    retryMs: env.TASKLINE_SSE_RETRY_MS,
    tenant: task.tenant,
    task,
    after,
    kind,
    metrics: deps.metrics,
  });

  lmsp
    .route('/tasks')
    .post(countCreate, requireJson, async (req, res) => {
      const body = parseBody(CreateTaskRequest, req.body);
      const { task } = await createTask(req, 'POST /lmsp/v1/tasks', body.input, body.on_restart ?? 'fail');
      res.status(202).location(`${API_PREFIX}/tasks/${task.id}`).json(taskObject(task));
    })
    .all(methodNotAllowed(['POST']));

  lmsp
    .route('/tasks/:id')
    .get(async (req, res) => {
      res.json(taskObject(await findTask(req)));
    })
    .all(methodNotAllowed(['GET']));

  lmsp
    .route('/tasks/:id/cancel')
    .post(async (req, res) => {
      const task = await findTask(req);
      const { task: after } = await store.cancel(task.id, task.tenant);
      res.json(taskObject(after));
    })
    .all(methodNotAllowed(['POST']));

  /**
   * A task's event stream with LMSP's resume rules (Last-Event-ID or `starting_after`), for
   * tenants here and for the operator console, whose streams count against `streamsOf`'s cap.
   */
  const followTask: TasklineApi['followTask'] = async (req, res, load, streamsOf) => {
    const after = resumePoint(req.headers['last-event-id'], req.query.starting_after);
    const task = await load();
    if (after > task.seq) {
      throw new TasklineError(
        'invalid_request',
        `This task has no event ${after} yet; its last is ${task.seq}.`,
      );
    }
    // HEAD (which Express routes here) answers the stream's headers without opening one.
    if (req.method === 'HEAD') {
      res.status(200).type('text/event-stream').end();
      return;
    }
    // A task stream is never tied to its reader: a disconnect only ends the stream.
    await streamTaskEvents(req, res, {
      ...streamOptions(req, task, after, 'events'),
      tenant: streamsOf(task),
    });
  };

  lmsp
    .route('/tasks/:id/events')
    .get(async (req, res) => {
      await followTask(
        req,
        res,
        () => findTask(req),
        (task) => task.tenant,
      );
    })
    .all(methodNotAllowed(['GET']));

  lmsp
    .route('/responses')
    .post(countCreate, requireJson, async (req, res) => {
      const body = parseBody(ResponseRequest, req.body);
      const { task } = await createTask(req, 'POST /lmsp/v1/responses', body, 'fail');
      if (body.background) return answerInBackground(req, res, task, body.stream, followTask);
      // A caller that leaves first cancels its response, unless it sent an Idempotency-Key: then
      // it will retry with it, and the retry gets the finished response (or the whole stream).
      const retried = idempotencyKeyOf(req.headers['idempotency-key']) !== null;
      const onGone = () => {
        if (!retried) cancelForGoneClient(task);
      };
      if (body.stream) {
        await streamTaskEvents(req, res, {
          ...streamOptions(req, task, 0, 'response'),
          onClientGone: onGone,
        });
        return;
      }
      // Synchronous: wait for the final event.
      let resolveFinal!: () => void;
      const final = new Promise<void>((r) => (resolveFinal = r));
      let gone = false;
      const onClose = () => {
        gone = true;
        onGone();
        resolveFinal();
      };
      res.once('close', onClose);
      try {
        const sub = await hub.subscribe(task.id, 0, (event) => {
          if (isFinalEventType(event.type)) resolveFinal();
        });
        await final;
        sub.close();
      } finally {
        if (!gone) res.off('close', onClose);
      }
      if (gone) return;
      const ended = await store.get(task.id, task.tenant);
      if (!ended) throw notFound();
      res.json(responseObject(ended));
    })
    .all(methodNotAllowed(['POST']));

  mountResponseRoutes(lmsp, { store, findTask, followTask });

  lmsp
    .route('/capabilities')
    .get((_req, res) => {
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
    })
    .all(methodNotAllowed(['GET']));

  lmsp
    .route('/models')
    .get((_req, res) => {
      res.json({ object: 'list', data: [...models.values()].map(modelObject) });
    })
    .all(methodNotAllowed(['GET']));

  // Without credentials: API explorers and client generators fetch the document anonymously.
  app
    .route(`${API_PREFIX}/openapi.json`)
    .get((_req, res) => {
      res.json(openapi);
    })
    .all(methodNotAllowed(['GET']));

  app.use(API_PREFIX, lmsp);

  const api: TasklineApi = {
    app,
    store,
    hub,
    auth,
    limits,
    streams,
    models,
    startDraining() {
      draining = true;
    },
    get inFlight() {
      return inFlight;
    },
    async settled() {
      while (cancels.size > 0) await Promise.allSettled([...cancels]);
    },
    followTask,
  };

  // ---- Other surfaces mount here: the MCP layer does `app.use('/mcp', ...)` through mountExtra,
  // reusing `api.auth.middleware` (sets req.tenant) and the same store and hub. ----
  deps.mountExtra?.(app, api);

  app.use(routeNotFound);
  app.use(
    errorHandler(
      logger,
      () => redis.status === 'ready',
      (reason) => deps.metrics?.redisUnavailableTotal.inc({ reason }),
    ),
  );
  return api;
}

function tenantOf(req: Request): string {
  if (!req.tenant) throw new TasklineError('unauthorized', 'This request is not authenticated.');
  return req.tenant.id;
}

export { StreamRegistry } from './sse.js';
export { TenantLimits, type LimitSettings } from './limits.js';
export { buildOpenApi } from './lmsp/openapi.js';
export { serve, type RunningServer } from './server.js';
export type { TasklineApi } from './types.js';
