// The face of @taskline/cli: the command runner, its exit codes, config and task id store.
export { runCli, USAGE } from './cli.js';
export type { CliIo } from './io.js';
export { EXIT, exitForStatus } from './exit.js';
export { resolveConfig, UsageError, type CliConfig } from './config.js';
export { SqliteTaskIdStore } from './sqlite-store.js';
