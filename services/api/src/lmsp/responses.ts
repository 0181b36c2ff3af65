/**
 * `POST /lmsp/v1/responses`: the OpenAI Responses API's create, in the background as a task like
 * any other, or held by its caller (streamed, or answered once the task ends).
 */
import type { Request, Response } from 'express';
import { callerLeft, type StreamSlot } from '@taskline/admission';
import { notFound, type TaskRecord } from '@taskline/engine';
import { OPENAI_STREAM_ENDS } from '../openai/events.js';
import { answerInBackground } from '../openai/routes.js';
import { streamTaskEvents } from '../sse.js';
import { tenantOf } from './gate.js';
import {
  fieldError,
  fingerprint,
  idempotencyKeyOf,
  parseBody,
  responseObject,
  ResponseRequest,
  resumePoint,
} from './schema.js';
import { checkResumable, streamOptions } from './stream.js';
import { createTask, type LmspContext } from './tasks.js';

/** The operation an idempotent `POST /responses` is fingerprinted under. */
const RESPONSES_OPERATION = 'POST /lmsp/v1/responses';

/**
 * `POST /responses`: in the background, a task like any other; otherwise the caller holds the
 * response (streamed, or answered once it ends), and one that leaves first cancels it, unless
 * it sent an Idempotency-Key: then it will retry with it, and the retry gets the finished
 * response (or the whole stream).
 */
export async function postResponse(ctx: LmspContext, req: Request, res: Response): Promise<void> {
  const { core } = ctx;
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
    body.background && body.stream ? resumePoint(req.headers['last-event-id'], req.query.starting_after) : 0;
  if (after > 1) await checkReplayResumable(ctx, req, body, after);
  const slot = body.stream ? await core.limits.openStream(tenantOf(req)) : undefined;
  let task: TaskRecord;
  try {
    task = await createTask(ctx, req, RESPONSES_OPERATION, body, 'fail', body);
  } catch (err) {
    await slot?.release().catch(() => undefined);
    throw err;
  }
  const keyed = idempotencyKeyOf(req.headers['idempotency-key']) !== null;
  try {
    await answerResponse(ctx, req, res, task, body, after, slot, keyed);
  } catch (err) {
    // Released twice at worst, when the stream itself had already let it go.
    await slot?.release().catch(() => undefined);
    // A caller answered with an error holds no handle on the task; with a key, its retry finds it.
    if (!keyed && !res.headersSent) await core.store.cancel(task.id, task.tenant).catch(() => undefined);
    throw err;
  }
}

/**
 * A resume point past a background stream's first event names events of the response an
 * earlier create with the same Idempotency-Key made: checked against that response before
 * anything is created, as a new one has only its `response.created` (event 1) to resume from.
 */
async function checkReplayResumable(
  { core }: LmspContext,
  req: Request,
  body: ResponseRequest,
  after: number,
): Promise<void> {
  const key = idempotencyKeyOf(req.headers['idempotency-key']);
  const earlier = key
    ? await core.store.findIdempotent(tenantOf(req), key, fingerprint(RESPONSES_OPERATION, body))
    : null;
  checkResumable(earlier ?? { seq: 1 }, after);
}

async function answerResponse(
  { core }: LmspContext,
  req: Request,
  res: Response,
  task: TaskRecord,
  body: ResponseRequest,
  after: number,
  slot: StreamSlot | undefined,
  keyed: boolean,
): Promise<void> {
  const { admission } = core;
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
