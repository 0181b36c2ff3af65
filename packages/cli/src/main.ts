import { runCli } from './cli.js';

// Ctrl-C stops following; the task itself keeps running on the server.
const controller = new AbortController();
process.once('SIGINT', () => controller.abort());

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
    process.exit(70);
  },
);
