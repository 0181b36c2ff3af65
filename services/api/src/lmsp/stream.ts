// Task event streams with LMSP's resume rules, for tenants and the console.
import type { Request, Response } from 'express';
import type { ConsoleDeps } from '@taskline/console';
import { historyExpired, isTerminal, TasklineError, type TaskRecord } from '@taskline/engine';
import type { ApiCore } from '../core.js';
import { streamTaskEvents, type StreamOptions } from '../sse.js';
import { resumePoint } from './schema.js';

/**
 * Serves a task's events from the request's resume point; open streams count under `streamsOf`.
 * The console's, plus how a stream ended early ends (`StreamOptions.interrupted`, `revoked`, `expired`).
 */
export type FollowTask = (
  ...args: [
    ...Parameters<ConsoleDeps['followTask']>,
    ends?: Pick<StreamOptions, 'interrupted' | 'revoked' | 'expired'>,
  ]
) => Promise<void>;

/** The SSE options of one of the request's task streams (LMSP events, or a `stream: true` response). */
export function streamOptions(
  core: ApiCore,
  req: Request,
  task: TaskRecord,
  after: number,
  kind: StreamOptions['kind'],
): StreamOptions {
  const { env } = core;
  return {
    hub: core.hub,
    history: (id, after, count) => core.store.events(id, after, count),
    historyPage: env.TASKLINE_SSE_HISTORY_PAGE_EVENTS,
    limits: core.limits,
    streams: core.streams,
    logger: core.logger.child({ request_id: req.id }),
    heartbeatMs: env.TASKLINE_SSE_HEARTBEAT_MS,
    maxBufferBytes: env.TASKLINE_SSE_MAX_BUFFER_BYTES,
    retryMs: env.TASKLINE_SSE_RETRY_MS,
    tenant: task.tenant,
    task,
    after,
    kind,
    metrics: core.metrics,
    stillAuthorized: req.tenant && core.auth.stillAuthorized(req.headers, req.tenant),
    // A tenant's JWT, or an operator's on the console's task streams.
    expiresAt: (req.tenant ?? req.operator)?.expiresAt,
  };
}

/** A resume point past a task's last event names nothing that was ever sent. */
export function checkResumable(task: Pick<TaskRecord, 'seq'>, after: number): void {
  if (after > task.seq)
    throw new TasklineError(
      'invalid_request',
      `This task has no event ${after} yet; its last is ${task.seq}.`,
    );
}

/**
 * A task's event stream with LMSP's resume rules (Last-Event-ID or `starting_after`), for
 * tenants and for the operator console, whose streams count against `streamsOf`'s cap. A task
 * stream is never tied to its reader: a disconnect only ends the stream.
 */
export function followTaskOf(core: ApiCore): FollowTask {
  return async function followTask(req: Request, res: Response, load, streamsOf, ends) {
    const after = resumePoint(req.headers['last-event-id'], req.query.starting_after);
    const task = await load();
    checkResumable(task, after);
    // HEAD (which Express routes here) answers the stream's headers without opening one, or the
    // error the stream would get for a history no longer kept.
    if (req.method === 'HEAD') {
      if ((await core.store.events(task.id, after, 1)).expired) throw historyExpired();
      res.status(200).type('text/event-stream').end();
      return;
    }
    // Nothing will ever follow the final event: 204 is what stops an EventSource reconnecting
    // (WHATWG HTML, Server-sent events, "announce the connection"); a 200 that ends is resumed.
    if (isTerminal(task.status) && after >= task.seq) return void res.status(204).end();
    await streamTaskEvents(req, res, {
      ...streamOptions(core, req, task, after, 'events'),
      tenant: streamsOf(task),
      ...ends,
    });
  };
}
