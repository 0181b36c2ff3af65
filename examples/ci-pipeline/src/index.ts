// run_ci_pipeline: the example tool a team copies; the module a tool worker loads (`--module dist/index.js`).
import { defineTool } from '@taskline/tool-sdk';
import { runPipeline } from './pipeline.js';
import { inputSchema, outputSchema } from './schema.js';

export const runCiPipeline = defineTool({
  name: 'run_ci_pipeline',
  title: 'Run a CI pipeline',
  description:
    'Clones a git repository, installs its dependencies (npm ci), runs its tests and builds it, streaming ' +
    'each step as progress; then asks for approval and deploys the build output. Runs as a task.',
  inputSchema,
  outputSchema,
  taskSupport: 'required',
  // Each step is checkpointed: an attempt after a crash continues with the first step not done.
  onRestart: 'resume',
  concurrency: 2,
  run: (args, ctx) => runPipeline(args, ctx),
});
