/** JSON logs, one event a line, on stdout; `level` filters below it. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

export function createLogger(
  base: Record<string, unknown>,
  level: LogLevel = 'info',
  write: (line: string) => void = (line) => process.stdout.write(line + '\n'),
): Logger {
  const emit = (lvl: LogLevel) => (msg: string, fields?: Record<string, unknown>) => {
    if (RANK[lvl] < RANK[level]) return;
    write(
      JSON.stringify({ ts: new Date().toISOString(), level: lvl, msg, ...base, ...fields }, errorReplacer),
    );
  };
  return {
    debug: emit('debug'),
    info: emit('info'),
    warn: emit('warn'),
    error: emit('error'),
    child: (fields) => createLogger({ ...base, ...fields }, level, write),
  };
}

// Error objects stringify to {} by default; keep what an operator needs.
function errorReplacer(_key: string, value: unknown): unknown {
  if (value instanceof Error)
    return { name: value.name, message: value.message, code: (value as { code?: unknown }).code };
  return value;
}
