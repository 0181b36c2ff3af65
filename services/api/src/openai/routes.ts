/**
 * The response routes of OpenAI's background mode, on the same tasks as LMSP 1.0 section 7: a
 * response `resp_<x>` is produced by the task `task_<x>`, so `GET /responses/{id}`,
 * `POST /responses/{id}/cancel` and the resumable `GET /responses/{id}?stream=true` are the task
 * routes seen through the response (LMSP 7.1, 7.3, 7.4), on any replica,
 * `GET /responses/{id}/input_items` reads the task's request (`input-items.ts`), and
 * `DELETE /responses/{id}` deletes an ended task (`TaskStore.delete`).
 */
import type { Request, Response, Router } from 'express';
import { z } from 'zod';
import { isWellFormedId, notFound, TasklineError, type TaskRecord, type TaskStore } from '@taskline/engine';
import { API_PREFIX, parseBody, responseObject } from '../lmsp/schema.js';
import type { FollowTask } from '../lmsp/stream.js';
import { OPENAI_STREAM_ENDS } from './events.js';
import { inputItemPage } from './input-items.js';
import { Include } from './params.js';
import { methodNotAllowed, routeNotFound } from '../problem.js';

export interface ResponseRouteDeps {
  store: TaskStore;
  /** The caller's response task by task id, or `404 task_not_found`. */
  findTask(req: Request, taskId: string): Promise<TaskRecord>;
  /** Serves a task's events from the request's resume point (the task event stream's handler). */
  followTask: FollowTask;
}

/** The task that produces response `id`; an id this service could not have made is unknown at once. */
export function taskIdOf(responseId: string): string | null {
  return isWellFormedId(responseId, 'resp') ? `task_${responseId.slice('resp_'.length)}` : null;
}

/**
 * A background response (OpenAI's mode, a task under another name) without `stream`: the queued
 * response at once (`202`); it runs on whoever reads it. With `stream`, the create serves its
 * events like `GET /responses/{id}?stream=true`, resumable the same way.
 */
export function answerInBackground(res: Response, task: TaskRecord): void {
  res.status(202).location(`${API_PREFIX}/responses/${task.responseId}`).json(responseObject(task));
}

/**
 * A query's `include` (`include[]=a&include[]=b` as the SDKs send a list, or `include=a`, maybe
 * repeated), held to what a create's takes: a value that asks for data not produced is refused.
 */
function checkInclude(query: Request['query']): void {
  const values = [query.include, query['include[]']].flat().filter((v) => v !== undefined && v !== '');
  if (values.length > 0) parseBody(z.object({ include: Include }), { include: values });
}

/** A tenant's streams count against its own cap. */
const tenantOf = (task: TaskRecord) => task.tenant;

export function mountResponseRoutes(router: Router, deps: ResponseRouteDeps): void {
  const find = (req: Request) => {
    const id = taskIdOf(String(req.params.id));
    if (!id) return Promise.reject(notFound());
    return deps.findTask(req, id);
  };

  router
    .route('/responses/:id')
    .get(async (req, res) => {
      checkInclude(req.query);
      const stream = req.query.stream;
      if (stream === 'true') return deps.followTask(req, res, () => find(req), tenantOf, OPENAI_STREAM_ENDS);
      if (stream !== undefined && stream !== 'false') {
        throw new TasklineError('invalid_request', 'stream: true or false.', { param: 'stream' });
      }
      res.json(responseObject(await find(req)));
    })
    // OpenAI's answer; the task's keys go at once, and every later read is the 404 of a task
    // never made. Only an ended one (`task_not_deletable`, 409): cancel it first.
    .delete(async (req, res) => {
      const task = await find(req);
      await deps.store.delete(task.id, task.tenant);
      res.json({ id: task.responseId, object: 'response', deleted: true });
    })
    // OpenAI's other routes under /responses (`input_tokens`, `compact`) are not a response's path.
    .all((req, res, next) =>
      (taskIdOf(String(req.params.id)) ? methodNotAllowed(['GET', 'DELETE']) : routeNotFound)(req, res, next),
    );

  router
    .route('/responses/:id/input_items')
    .get(async (req, res) => {
      checkInclude(req.query);
      res.json(inputItemPage(await find(req), req.query));
    })
    .all(methodNotAllowed(['GET']));

  router
    .route('/responses/:id/cancel')
    .post(async (req, res) => {
      const task = await find(req);
      const { task: after } = await deps.store.cancel(task.id, task.tenant);
      res.json(responseObject(after));
    })
    .all(methodNotAllowed(['POST']));
}
