export { runCli, USAGE, type CliIo } from './cli.js';
export { EXIT, exitForStatus } from './exit.js';
export { resolveConfig, UsageError, type CliConfig } from './config.js';
export { SqliteTaskIdStore } from './sqlite-store.js';
