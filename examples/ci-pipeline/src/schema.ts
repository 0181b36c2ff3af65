// What run_ci_pipeline takes and returns, as zod schemas (the MCP inputSchema and outputSchema).
import { isAbsolute } from 'node:path';
import { z } from 'zod';

/** A path that stays inside the repository: relative, no `..` segment. */
const inRepository = (path: string) => !isAbsolute(path) && !path.split(/[\\/]/).includes('..');

export const inputSchema = z.object({
  repository: z
    .string()
    .min(1)
    .describe('The git repository to build: a URL or a path on the worker, as `git clone` takes it.'),
  deploy_to: z
    .string()
    .min(1)
    .describe('Folder on the worker the build output is deployed into, as release-<task key>.'),
  artifact: z
    .string()
    .default('dist')
    .refine(inRepository, 'a relative path inside the repository')
    .describe('The build output, relative to the repository root (default dist).'),
});

export const STATUSES = ['deployed', 'not_approved', 'failed', 'cancelled'] as const;

export const outputSchema = z.object({
  status: z.enum(STATUSES),
  completed_steps: z.array(z.string()),
  failed_step: z.string().optional(),
  release: z.string().optional(),
});

export type PipelineArgs = z.infer<typeof inputSchema>;
export type PipelineOutput = z.infer<typeof outputSchema>;
