// The CLI's stdio and environment, given by its caller.
/** What the CLI reads and writes, given by its caller (the bin script, or a test). */
export interface CliIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  stdin: NodeJS.ReadableStream;
  env: NodeJS.ProcessEnv;
  /** Fires on Ctrl-C. */
  signal?: AbortSignal;
}
