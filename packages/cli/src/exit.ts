// What `taskline` exit codes mean, and the one line printed for an error.
import { TasklineClientError } from '@taskline/client';
import { scrubString } from '@taskline/log';
import { UsageError } from './config.js';

/** What `taskline` exit codes mean; README's "Client and CLI" section lists the same. */
export const EXIT = {
  /** Done: the task succeeded, the cancel is confirmed, the command worked. */
  ok: 0,
  /** The task ended `failed`. */
  taskFailed: 1,
  /** Bad flags, arguments or configuration. */
  usage: 2,
  /** The task ended `cancelled`. */
  taskCancelled: 3,
  /** No such task (or key): unknown, expired, or another tenant's. */
  notFound: 4,
  /** The API key or token was refused. */
  auth: 5,
  /** The server refused the request (invalid input, limit reached, not cancelable, …). */
  refused: 6,
  /** The server could not be reached or failed (network, 5xx); the task may still be running. */
  unavailable: 7,
  /** A cancel was requested and the task has not stopped yet. */
  cancelRequested: 8,
  /** A bug in the CLI. */
  internal: 70,
  /** Interrupted (Ctrl-C): tasks keep running; `taskline tasks resume` follows them again. */
  interrupted: 130,
  /** stdout's reader went away (`taskline run … | head`): 128 + SIGPIPE, as shells expect; tasks keep running. */
  stdoutClosed: 141,
} as const;

export function exitForStatus(status: string): number {
  if (status === 'succeeded') return EXIT.ok;
  if (status === 'failed') return EXIT.taskFailed;
  if (status === 'cancelled') return EXIT.taskCancelled;
  if (status === 'cancelling') return EXIT.cancelRequested;
  return EXIT.unavailable;
}

/**
 * One line for any error, never a stack trace, and the exit code that says what happened. The
 * line holds no URL's password (REDIS_URL's, say): it ends up in terminals and CI logs.
 */
export function describeError(err: unknown): { code: number; message: string } {
  const { code, message } = describe(err);
  return { code, message: scrubString(message) };
}

function describe(err: unknown): { code: number; message: string } {
  if (err instanceof UsageError) return { code: EXIT.usage, message: err.message };
  if (err instanceof TasklineClientError) {
    const message = `${err.message} [${err.code}]`;
    if (err.code === 'task_not_found' || err.code === 'key_not_found')
      return { code: EXIT.notFound, message };
    if (err.code === 'unauthorized' || err.code === 'forbidden') return { code: EXIT.auth, message };
    if (err.code === 'aborted') return { code: EXIT.interrupted, message };
    if (err.code === 'network_error' || err.code === 'protocol_error' || (err.status ?? 0) >= 500)
      return { code: EXIT.unavailable, message };
    return { code: EXIT.refused, message };
  }
  const e = err as { code?: string; message?: string };
  if (typeof e?.code === 'string' && /^(ECONNREFUSED|ENOTFOUND|ETIMEDOUT|ECONNRESET)$/.test(e.code))
    return { code: EXIT.unavailable, message: `Cannot reach the server: ${e.message ?? e.code}` };
  return { code: EXIT.internal, message: `internal error: ${e?.message ?? String(err)}` };
}
