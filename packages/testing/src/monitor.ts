// A parsed `MONITOR` stream of a test's Redis.
import { connect } from 'node:net';

/** A running `MONITOR`: every command Redis runs after `ready`, handed over in order. */
export interface RedisMonitor {
  /** Settles once Redis has answered `MONITOR`: commands from then on are seen. */
  ready: Promise<void>;
  stop(): void;
}

/**
 * `MONITOR` on a connection of its own, parsed here: ioredis's `monitor()` fails now and then with
 * "Command queue state error" when the first lines arrive with the `OK` it waits for, as they do
 * on a busy Redis. `onCommand` gets each command's name and arguments, unescaped.
 */
export function monitorRedis(url: string, onCommand: (args: string[]) => void): RedisMonitor {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  let buffered = '';
  let resolveReady!: () => void;
  let rejectReady!: (err: Error) => void;
  const ready = new Promise<void>((resolve, reject) => {
    resolveReady = resolve;
    rejectReady = reject;
  });
  socket.setEncoding('latin1'); // byte for byte: `\xHH` escapes stand for bytes
  socket.on('error', (err) => rejectReady(err));
  socket.on('connect', () => socket.write('MONITOR\r\n'));
  socket.on('data', (chunk: string) => {
    buffered += chunk;
    let end: number;
    while ((end = buffered.indexOf('\r\n')) >= 0) {
      const line = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      if (line === '+OK') resolveReady();
      else if (line.startsWith('-')) rejectReady(new Error(line.slice(1)));
      else if (line.startsWith('+')) onCommand(monitorArgs(line));
    }
  });
  return { ready, stop: () => void socket.destroy() };
}

/** The quoted arguments of one `MONITOR` line: `+<time> [<db> <client>] "cmd" "arg" ...`. */
export function monitorArgs(line: string): string[] {
  const args: string[] = [];
  for (const m of line.matchAll(/"((?:[^"\\]|\\.)*)"/g)) {
    const bytes = m[1]!.replace(/\\(x[0-9a-fA-F]{2}|.)/g, (_all, esc: string) =>
      esc.length === 3 ? String.fromCharCode(parseInt(esc.slice(1), 16)) : (ESCAPES[esc] ?? esc),
    );
    args.push(Buffer.from(bytes, 'latin1').toString('utf8'));
  }
  return args;
}

const ESCAPES: Record<string, string> = { n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b' };
