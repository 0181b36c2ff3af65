// The context of a tool run inline (no task).
import type { ToolContext } from '@taskline/tools';

/** Runs a tool inline (no task): only what needs no durable state is available. */
export function inlineContext(tenant: string, signal: AbortSignal): ToolContext {
  const needsTask = async (): Promise<never> => {
    throw new Error('this tool runs inline and cannot ask for input or generate');
  };
  return { taskId: '', tenant, signal, progress: async () => undefined, ask: needsTask, generate: needsTask };
}
