/** LMSP's discovery handlers (LMSP 1.0 section 9): capabilities and the served models. */
import type { Request, Response } from 'express';
import { DURABILITY_LOSS, servedModel } from '@taskline/engine';
import { LMSP_VERSION, modelObject } from './schema.js';
import type { LmspContext } from './tasks.js';

export function capabilities({ core: { env, served } }: LmspContext, _req: Request, res: Response): void {
  const all = [...served.models.values()];
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
      max_active_tasks: env.TASKLINE_MAX_UNFINISHED_TASKS,
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

export function listModels({ core: { served } }: LmspContext, _req: Request, res: Response): void {
  res.json({ object: 'list', data: [...served.models.values()].map(modelObject) });
}

/** One served model (OpenAI's `models.retrieve`); any other id is `model_not_found`. */
export function getModel({ core: { served } }: LmspContext, req: Request, res: Response): void {
  res.json(modelObject(servedModel(served, String(req.params.id))));
}
