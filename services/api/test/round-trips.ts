import { createServer, connect, type AddressInfo, type Socket } from 'node:net';

/** One round trip of one client connection: the commands it sent before its next reply came back. */
export interface Turn {
  connection: number;
  /** 0, 1, 2…: the connection's round trips in order. */
  index: number;
  /** Each command as its name (lowercase) and arguments. */
  commands: string[][];
}

/**
 * A TCP proxy in front of Redis that groups each client connection's commands by round trip: a
 * command sent after a reply came back starts a new turn. A command that waits for another's reply
 * is always in a later turn than it; commands written together (a pipeline) share one. Counts are
 * exact, not timed: they only depend on what was sent before which reply.
 */
export async function roundTripProxy(redisUrl: string) {
  const target = new URL(redisUrl);
  const turns: Turn[] = [];
  const sockets = new Set<Socket>();
  let connections = 0;
  const server = createServer((client) => {
    const connection = connections++;
    const upstream = connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    const parse = respCommands();
    let current: Turn | null = null;
    client.on('data', (chunk: Buffer) => {
      current ??= turns[turns.push({ connection, index: indexOf(connection), commands: [] }) - 1]!;
      current.commands.push(...parse(chunk));
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      current = null; // a reply came back: what the client sends next is its next round trip
      client.write(chunk);
    });
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', close).on('error', close);
    upstream.on('close', close).on('error', close);
  });
  const indexOf = (connection: number) => turns.filter((t) => t.connection === connection).length;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `redis://127.0.0.1:${port}`,
    turns,
    close(): Promise<void> {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** An incremental parser of what clients send: RESP arrays of bulk strings, one per command. */
function respCommands(): (chunk: Buffer) => string[][] {
  let buffered = Buffer.alloc(0);
  return (chunk) => {
    buffered = Buffer.concat([buffered, chunk]);
    const commands: string[][] = [];
    for (;;) {
      const parsed = parseArray(buffered);
      if (!parsed) return commands;
      commands.push(parsed.args);
      buffered = buffered.subarray(parsed.end);
    }
  };
}

function parseArray(buf: Buffer): { args: string[]; end: number } | null {
  const line = (from: number) => {
    const end = buf.indexOf('\r\n', from);
    return end < 0 ? null : { text: buf.toString('latin1', from, end), next: end + 2 };
  };
  const head = line(0);
  if (!head) return null;
  if (!head.text.startsWith('*')) throw new Error(`not a RESP array: ${head.text}`);
  const args: string[] = [];
  let at = head.next;
  for (let i = 0; i < Number(head.text.slice(1)); i++) {
    const size = line(at);
    if (!size) return null;
    const length = Number(size.text.slice(1));
    if (buf.length < size.next + length + 2) return null;
    args.push(buf.toString('utf8', size.next, size.next + length));
    at = size.next + length + 2;
  }
  args[0] = args[0]!.toLowerCase();
  return { args, end: at };
}
