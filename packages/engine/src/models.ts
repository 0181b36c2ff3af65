// The models a deployment serves, and the checks of a request's model and output cap.
import { TasklineError } from './errors.js';

/** A model this deployment serves, and whether its backend can snapshot (`on_restart: resume`). */
export interface ModelInfo {
  id: string;
  canSnapshot: boolean;
}

/**
 * What a deployment serves: the models (TASKLINE_MODELS) and the cap, which is also the default,
 * of `max_output_tokens` (TASKLINE_MAX_OUTPUT_TOKENS). LMSP creates and the tools' generations
 * (MCP `generate`, `batch_generate`) check a response against the same rules here.
 */
export interface ServedModels {
  models: ReadonlyMap<string, ModelInfo>;
  maxOutputTokens: number;
}

export function servedModelsFromEnv(env: {
  TASKLINE_MODELS: string;
  TASKLINE_SNAPSHOT_MODELS: string;
  TASKLINE_MAX_OUTPUT_TOKENS: number;
}): ServedModels {
  const snapshot = new Set(env.TASKLINE_SNAPSHOT_MODELS.split(',').filter(Boolean));
  return {
    models: new Map(env.TASKLINE_MODELS.split(',').map((id) => [id, { id, canSnapshot: snapshot.has(id) }])),
    maxOutputTokens: env.TASKLINE_MAX_OUTPUT_TOKENS,
  };
}

/** The served model `id`; any other is `model_not_found` (a task for it would wait forever). */
export function servedModel(served: ServedModels, id: string): ModelInfo {
  const model = served.models.get(id);
  if (!model) throw new TasklineError('model_not_found', `This deployment does not serve the model "${id}".`);
  return model;
}

/** `max_output_tokens` as stored: the cap when absent; above the cap is `invalid_request`. */
export function outputTokens(served: ServedModels, requested: number | undefined): number {
  const max = served.maxOutputTokens;
  if (requested !== undefined && requested > max) {
    throw new TasklineError('invalid_request', `max_output_tokens: at most ${max} on this deployment`, {
      errors: [{ path: 'max_output_tokens', message: `at most ${max}` }],
    });
  }
  return requested ?? max;
}
