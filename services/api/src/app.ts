/**
 * The api's HTTP shell: request ids and logs, health, and the protocol surfaces mounted side by
 * side (LMSP 1.0 with the OpenAI routes at `/lmsp/v1`, MCP at `/mcp`, the operator console),
 * each built on the same core and its one admission path.
 */
import express, { type Express, type RequestHandler, type Router } from 'express';
import { operatorAuthenticator } from '@taskline/auth';
import { mountConsole } from '@taskline/console';
import { newId, redisAnswers } from '@taskline/engine';
import { createMcpRouter } from '@taskline/mcp';
import { httpMetrics, type BuildInfo } from '@taskline/metrics';
import { createCore, type ApiCore, type AppDeps } from './core.js';
import { lmspRouter } from './lmsp/routes.js';
import { API_PREFIX } from './lmsp/schema.js';
import { followTaskOf, type FollowTask } from './lmsp/stream.js';
import { errorHandler, methodNotAllowed, routeNotFound, sendProblem } from './problem.js';

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** Echoed as `X-Request-Id` and written on every log line of the request. */
      id: string;
    }
  }
}

export type { AppDeps } from './core.js';

export interface TasklineApi {
  app: Express;
  store: ApiCore['store'];
  hub: ApiCore['hub'];
  limits: ApiCore['limits'];
  streams: ApiCore['streams'];
  /** Shutdown: readiness fails, responses ask clients to close their connection. */
  startDraining(): void;
  /** Requests being served now (streams included). */
  readonly inFlight: number;
  /** Settles once every cancel that a departed client caused has been written. */
  settled(): Promise<void>;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** MCP at `/mcp` on the same engine, authenticator (API keys, JWT) and admission as LMSP. */
function mcpRouter(core: ApiCore): Router {
  const { metrics } = core;
  return createMcpRouter({
    store: core.store,
    hub: core.hub,
    env: core.env,
    logger: core.logger.child({ surface: 'mcp' }),
    authenticate: async (req) => {
      const tenant = await core.guardAuth(req, core.auth.authenticate);
      return {
        id: tenant.id,
        stillAuthorized: core.auth.stillAuthorized(req.headers, tenant),
        expiresAt: tenant.expiresAt,
      };
    },
    admission: core.admission,
    extensions: core.mcpExtensions,
    observe: metrics && {
      taskCreated: (tenant) =>
        metrics.taskCreatesTotal.inc({
          protocol: 'mcp',
          tenant: metrics.tenant(tenant),
          outcome: 'accepted',
        }),
      listener: (delta) => {
        metrics.mcpListenersOpen.inc(delta);
        metrics.sseStreamsOpen.inc({ protocol: 'mcp' }, delta);
      },
      unavailable: (reason) => metrics.redisUnavailableTotal.inc({ reason }),
    },
  });
}

/** The operator console at `/console` and `/admin/v1`: operators only, never a tenant credential. */
function mountOperatorConsole(app: Express, core: ApiCore, followTask: FollowTask): void {
  const { env, metrics } = core;
  mountConsole(app, {
    store: core.store,
    operators: operatorAuthenticator(env, core.auth, core.guardAuth),
    models: [...core.served.models.keys()],
    followTask,
    // The live views' streams: counted, capped and ended on shutdown as task streams are.
    live: {
      openStream: (name) => core.limits.openStream(name),
      register: (stream) => core.streams.add(stream),
      heartbeatMs: env.TASKLINE_SSE_HEARTBEAT_MS,
      retryMs: env.TASKLINE_SSE_RETRY_MS,
      maxBufferBytes: env.TASKLINE_SSE_MAX_BUFFER_BYTES,
      opened: (delta) => metrics?.sseStreamsOpen.inc({ protocol: 'console' }, delta),
    },
    usage: (tenants) => core.limits.usage(tenants),
    limits: {
      maxUnfinishedTasks: env.TASKLINE_MAX_UNFINISHED_TASKS,
      maxStreams: env.TASKLINE_MAX_STREAMS,
      requestBurst: env.TASKLINE_RATE_LIMIT_BURST,
    },
    prometheusUrl: env.TASKLINE_PROMETHEUS_URL,
    traceUrlTemplate: env.TASKLINE_TRACE_URL_TEMPLATE,
    retentionMs: env.TASKLINE_TASK_RETENTION_S * 1000,
    // LMSP's own: the console's wrong methods answer as LMSP's do, in the api's problem+json.
    methodNotAllowed,
    webhooks: { redis: core.redis, ...core.webhooks },
  });
}

/** Whether this replica is shutting down, and the requests it is serving. */
interface Serving {
  draining: boolean;
  inFlight: number;
}

/** Request ids (`X-Request-Id`), one `request` log line per request, and the in-flight count. */
function requestLog(core: ApiCore, serving: Serving): RequestHandler {
  const { logger } = core;
  return (req, res, next) => {
    const given = req.headers['x-request-id'];
    req.id = typeof given === 'string' && REQUEST_ID.test(given) ? given : newId('req');
    res.setHeader('X-Request-Id', req.id);
    if (serving.draining) res.setHeader('Connection', 'close');
    const started = process.hrtime.bigint();
    // Taken now: a router mounted under a prefix (`/lmsp/v1`, `/admin/v1`) leaves `req.path`
    // without it, so an operator's `/admin/v1/tasks/...` would read as a tenant's `/tasks/...`.
    const path = req.path;
    serving.inFlight++;
    res.once('close', () => {
      serving.inFlight--;
      logger.info('request', {
        request_id: req.id,
        method: req.method,
        path,
        status: res.statusCode,
        tenant: req.tenant?.id,
        operator: req.operator?.id,
        ms: Number((process.hrtime.bigint() - started) / 1000n) / 1000,
        aborted: !res.writableFinished,
      });
    });
    next();
  };
}

/** `/healthz` (the process answers) and `/readyz` (Redis answers, and the replica is not draining). */
function mountHealth(app: Express, core: ApiCore, serving: Serving, build: BuildInfo | undefined): void {
  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok', service: 'api', ...build });
  });
  app.get('/readyz', async (_req, res) => {
    const notReady = (detail: string) => {
      res.setHeader('Retry-After', '1');
      sendProblem(res, 'unavailable', detail);
    };
    if (serving.draining) return notReady('This replica is shutting down.');
    const ok = await Promise.race([
      redisAnswers(core.redis),
      new Promise<boolean>((r) => setTimeout(r, 1000, false).unref()),
    ]);
    if (ok) res.json({ status: 'ok' });
    else notReady('Redis is unreachable.');
  });
}

/** Builds the Express 5 app of the `api` service. */
export function createApp(deps: AppDeps): TasklineApi {
  const core = createCore(deps);
  const { redis, logger } = core;
  const followTask = followTaskOf(core);
  const serving: Serving = { draining: false, inFlight: 0 };

  const app = express();
  app.disable('x-powered-by');
  // Only the documented paths exist (every router here is case-sensitive too): `/LMSP/V1/...` is
  // the 404 problem, not another name of `/lmsp/v1/...`. Set before the app's router is made.
  app.enable('case sensitive routing');
  // The client address (`req.ip`) that failed authentications are counted by: behind a load
  // balancer, the one its X-Forwarded-For gives, from the proxies named here only.
  app.set('trust proxy', core.env.TASKLINE_TRUST_PROXY);
  // Task objects change under the same URL; a body hash as validator buys nothing.
  app.set('etag', false);

  app.use(requestLog(core, serving));
  if (deps.metrics) app.use(httpMetrics(deps.metrics));
  mountHealth(app, core, serving, deps.build);

  app.use(API_PREFIX, lmspRouter(core, followTask));
  mountOperatorConsole(app, core, followTask);
  app.use('/mcp', mcpRouter(core));

  app.use(routeNotFound);
  app.use(
    errorHandler(
      logger,
      () => redis.status === 'ready',
      (reason) => deps.metrics?.redisUnavailableTotal.inc({ reason }),
    ),
  );
  return {
    app,
    store: core.store,
    hub: core.hub,
    limits: core.limits,
    streams: core.streams,
    startDraining() {
      serving.draining = true;
    },
    get inFlight() {
      return serving.inFlight;
    },
    settled: () => core.admission.settled(),
  };
}
