// The `taskline` binary's entry: runs one command with the process's stdio and exits with its code.
import { exitOnStartFailure } from '@taskline/log';
import { runCli } from './cli.js';
import { EXIT } from './exit.js';

// `taskline tool-worker --module <path>` is the tool-worker service itself: it runs until drained.
// Imported only for that command: the tool worker (BullMQ, the MCP SDKs, tracing) cost every other
// command about a second of CPU at start.
if (process.argv[2] === 'tool-worker') {
  exitOnStartFailure('tool-worker', async () => {
    const { runToolWorker } = await import('@taskline/tool-worker');
    return runToolWorker(process.argv.slice(3), process.env);
  });
} else {
  runCommand();
}

/** Every other command: one run of `runCli`, then exit with its code. */
function runCommand(): void {
  // Ctrl-C stops following; the task itself keeps running on the server.
  const controller = new AbortController();
  process.once('SIGINT', () => controller.abort());
  // A closed pipe (`taskline run … | head`) is the reader being done, not a failure: stop quietly,
  // as a process killed by SIGPIPE would (Node ignores the signal and reports EPIPE instead).
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') process.stderr.write(`taskline: cannot write to stdout: ${err.message}\n`);
    process.exit(err.code === 'EPIPE' ? EXIT.stdoutClosed : EXIT.internal);
  });

  runCli(process.argv.slice(2), {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    env: process.env,
    signal: controller.signal,
  }).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`taskline: internal error: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(EXIT.internal);
    },
  );
}
