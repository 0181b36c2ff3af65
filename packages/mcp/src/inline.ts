// The context of a tool run inline (no task).
import type { ToolContext } from '@taskline/tools';

const quiet = { info() {}, warn() {}, error() {} };

/**
 * Runs a tool inline (no task): only what needs no durable state is available. There is no task,
 * so no attempt to resume and nothing to checkpoint; asking, awaiting a callback, generating and
 * checkpointing throw.
 */
export function inlineContext(tenant: string, signal: AbortSignal): ToolContext {
  const needsTask = async (): Promise<never> => {
    throw new Error(
      'this tool runs inline and cannot ask for input, await a callback, generate or checkpoint',
    );
  };
  return {
    taskId: '',
    tenant,
    attempt: 1,
    signal,
    resumed: undefined,
    idempotencyKey: '',
    log: quiet,
    progress: async () => undefined,
    checkpoint: needsTask,
    ask: needsTask,
    awaitCallback: needsTask,
    generate: needsTask,
  };
}
