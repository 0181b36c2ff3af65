/**
 * The LMSP 1.0 routes under `/lmsp/v1` (tasks, responses, event streams, discovery; LMSP 1.0
 * sections 6, 7 and 9), with the OpenAI Responses API's background routes on the same tasks.
 * Every request goes through the one admission path (`@taskline/admission`) before its handler.
 */
import express, { type Request, type Response, type Router } from 'express';
import { exceptOptions } from '@taskline/auth';
import type { ApiCore } from '../core.js';
import { mountResponseRoutes } from '../openai/routes.js';
import { methodNotAllowed } from '../problem.js';
import { capabilities, getModel, listModels } from './discovery.js';
import { countCreate, lmspGate, requireJson, tenantOf, type Reservations } from './gate.js';
import { buildOpenApi } from './openapi.js';
import { postResponse } from './responses.js';
import type { FollowTask } from './stream.js';
import { cancelTask, findTask, getTask, postTask, taskEvents, type LmspContext } from './tasks.js';
import { mountWebhookRoutes } from './webhooks.js';
import { mountAnswerLinks } from './answer-links.js';
import { mountCallbacks } from './callbacks.js';

export function lmspRouter(core: ApiCore, followTask: FollowTask): Router {
  const { store } = core;
  const openapi = buildOpenApi();
  const reservations: Reservations = new WeakMap();
  const ctx: LmspContext = { core, followTask, reservations };
  /** Each handler is a plain function of the context; Express gets it bound. */
  const withCtx =
    (handler: (ctx: LmspContext, req: Request, res: Response) => unknown) => (req: Request, res: Response) =>
      handler(ctx, req, res);
  const counted = countCreate(core);
  const findTaskOf = (req: Request, id?: string) => findTask(ctx, req, id);

  const router = express.Router({ caseSensitive: true });
  // Without credentials: API explorers and client generators fetch the document anonymously.
  router
    .route('/openapi.json')
    .get((_req, res) => void res.json(openapi))
    .all(methodNotAllowed(['GET']));
  // The signed token is the credential: no API key, no tenant limits (docs/webhooks.md).
  mountAnswerLinks(router, { redis: core.redis, store, links: core.webhooks.links });
  mountCallbacks(router, {
    store,
    secret: core.webhooks.links?.secret,
    maxBodyBytes: core.env.TASKLINE_MAX_BODY_BYTES,
  });
  // Authentication, admission and the body, for every method but OPTIONS (`exceptOptions`).
  router.use(exceptOptions(lmspGate(core, reservations)));
  router
    .route('/tasks')
    .post(counted, requireJson, withCtx(postTask))
    .all(methodNotAllowed(['POST']));
  router
    .route('/tasks/:id')
    .get(withCtx(getTask))
    .all(methodNotAllowed(['GET']));
  router
    .route('/tasks/:id/cancel')
    .post(withCtx(cancelTask))
    .all(methodNotAllowed(['POST']));
  router
    .route('/tasks/:id/events')
    .get(withCtx(taskEvents))
    .all(methodNotAllowed(['GET']));
  router
    .route('/responses')
    .post(counted, requireJson, withCtx(postResponse))
    .all(methodNotAllowed(['POST']));
  mountResponseRoutes(router, { store, findTask: findTaskOf, followTask });
  mountWebhookRoutes(router, { redis: core.redis, ...core.webhooks, tenantOf });
  router
    .route('/capabilities')
    .get(withCtx(capabilities))
    .all(methodNotAllowed(['GET']));
  router
    .route('/models')
    .get(withCtx(listModels))
    .all(methodNotAllowed(['GET']));
  router
    .route('/models/:id')
    .get(withCtx(getModel))
    .all(methodNotAllowed(['GET']));
  return router;
}
