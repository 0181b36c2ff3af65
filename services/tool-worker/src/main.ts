// The tool-worker as deployed: `--module <path>` (or TASKLINE_TOOL_MODULE) names the tools to serve.
import { exitOnStartFailure } from '@taskline/log';
import { runToolWorker } from './cli.js';

exitOnStartFailure('tool-worker', () => runToolWorker(process.argv.slice(2), process.env));
