// JSON logs, one event a line, with credentials redacted.
import { trace } from '@opentelemetry/api';
import { pino, type DestinationStream, type Logger as Pino } from 'pino';
import { StdoutLines } from './stdout.js';

export { droppedLogLines } from './stdout.js';

/** JSON logs, one event a line, on stdout; `level` filters below it. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

/** What stands in for a credential in a log line. */
export const REDACTED = '[redacted]';

/** Field names that hold a credential, wherever a caller puts them (matched exactly). */
const SECRET_FIELDS = new Set([
  'authorization',
  'Authorization',
  'cookie',
  'x-api-key',
  'apiKey',
  'api_key',
  'token',
  'accessToken',
  'access_token',
  'refreshToken',
  'refresh_token',
  'password',
  'secret',
  'clientSecret',
  'client_secret',
]);

/**
 * Credentials inside values, which no field name gives away: the password of a URL's userinfo
 * (`redis://user:secret@host`, as in REDIS_URL) and the token of an `Authorization` value, up to
 * white space (a static key may hold any visible character but a comma).
 */
export function scrubString(s: string): string {
  return s
    .replace(/(\b[a-z][a-z0-9+.-]*:\/\/[^/\s:@]*:)[^@\s/]*@/gi, `$1${REDACTED}@`)
    .replace(/\b(Bearer|Basic)\s+\S+/g, `$1 ${REDACTED}`);
}

/**
 * Strings scrubbed, fields named like a credential redacted and errors made readable (they
 * stringify to `{}`: name, message and code are what an operator needs), in plain objects and
 * arrays a few levels down; other values as they are. One walk that copies what it logs anyway:
 * pino's path redaction cost the api a twentieth of its CPU per request.
 */
function scrub(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return scrubString(value);
  if (value instanceof Error) {
    const code = (value as { code?: unknown }).code;
    return { name: value.name, message: scrubString(value.message), code };
  }
  if (depth >= 4 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => scrub(v, depth + 1));
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = SECRET_FIELDS.has(k) ? REDACTED : scrub(v, depth + 1);
  return out;
}

/**
 * Stdout's bound (TASKLINE_LOG_BUFFER_BYTES): bytes of lines that may wait for a reader that lags
 * before lines are dropped; one bound for the process, set by the last logger made.
 */
export interface StdoutOptions {
  bufferBytes: number;
}

/**
 * A pino logger behind Taskline's face: each event is one JSON line `{level, ts, ...base, ...fields,
 * msg}` (level by name, ts in ISO 8601). Credentials never reach a line: fields named like one, URL
 * passwords and bearer tokens inside any string are replaced by `scrub`.
 * `out` is stdout (`StdoutLines`), or (tests, stderr) a function that gets each line without its newline.
 */
export function createLogger(
  base: Record<string, unknown>,
  level: LogLevel,
  out: StdoutOptions | ((line: string) => void),
): Logger {
  const fields = scrub(base) as Record<string, unknown>;
  const destination: DestinationStream =
    typeof out === 'function'
      ? { write: (line: string) => out(line.endsWith('\n') ? line.slice(0, -1) : line) }
      : stdout(fields, out.bufferBytes);
  const root = pino(
    {
      level,
      base: fields,
      timestamp: () => `,"ts":"${new Date().toISOString()}"`,
      formatters: { level: (label) => ({ level: label }) },
      // Errors are already plain objects (`scrub`); pino's own `err` serializer would drop `code`.
      serializers: { err: (err: unknown) => err },
      mixin: traceFields,
    },
    destination,
  );
  return wrap(root);
}

/**
 * `trace_id` and `span_id` of the span active where a line is logged (OpenTelemetry, when a
 * service started tracing); nothing otherwise, at the cost of one lookup.
 */
function traceFields(): { trace_id?: string; span_id?: string } {
  const span = trace.getActiveSpan();
  if (!span?.isRecording()) return {};
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}

let shared: StdoutLines | undefined;

/**
 * The process's one stdout writer. Its `log_lines_dropped` lines carry the first logger's base and
 * go out whatever the level: lost errors are counted too.
 */
function stdout(base: Record<string, unknown>, bufferBytes: number): StdoutLines {
  if (shared) shared.bufferBytes = bufferBytes;
  shared ??= new StdoutLines(bufferBytes, (dropped) => {
    const ts = new Date().toISOString();
    return `${JSON.stringify({ level: 'warn', ts, ...base, dropped, msg: 'log_lines_dropped' })}\n`;
  });
  return shared;
}

function wrap(p: Pino): Logger {
  const emit =
    (lvl: LogLevel) =>
    (msg: string, fields?: Record<string, unknown>): void => {
      if (!p.isLevelEnabled(lvl)) return;
      p[lvl](fields ? (scrub(fields) as object) : {}, scrubString(msg));
    };
  return {
    debug: emit('debug'),
    info: emit('info'),
    warn: emit('warn'),
    error: emit('error'),
    child: (fields) => wrap(p.child(scrub(fields) as Record<string, unknown>)),
  };
}

/**
 * Runs a service's start-up. A failure (bad settings, a Redis that refuses durability, a model
 * that will not load) is one scrubbed JSON line on stderr and exit code 1, like every other event,
 * not Node's multi-line stack trace.
 */
export function exitOnStartFailure(service: string, start: () => Promise<unknown>): void {
  start().catch((error: unknown) => {
    const log = createLogger({ service, pid: process.pid }, 'error', (line) =>
      process.stderr.write(`${line}\n`),
    );
    log.error('start_failed', { error });
    process.exit(1);
  });
}
