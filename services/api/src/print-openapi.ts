/**
 * Prints the OpenAPI 3.1 document of the api (`pnpm --filter @taskline/api openapi` writes it to
 * `openapi.json`). API keys are managed with the `taskline keys` command of `@taskline/cli`.
 */
import { buildOpenApi } from './lmsp/openapi.js';

process.stdout.write(JSON.stringify(buildOpenApi(), null, 2) + '\n');
