/** A TCP proxy in front of one Redis that tests break on purpose: lost replies, outages, resets. */
import { createHash, randomUUID } from 'node:crypto';
import { createServer, connect, type Socket } from 'node:net';
import { freePort } from './ports.js';

/** A command as a client sent it: the command name (as sent) and its arguments, as strings. */
export type RedisCommand = string[];

/**
 * A proxy between the clients a test points at `url` and the Redis at `target`. Every fault is
 * what a network does to a TCP connection (a reset, a refused connect), never a Redis error, so
 * the client sees exactly what a load balancer, a NAT or a restarting Redis would show it.
 */
export interface RedisProxy {
  readonly port: number;
  /** `redis://127.0.0.1:<port>` */
  readonly url: string;
  /**
   * Lets the `nth` command (1 = the next) matching `match` reach Redis, waits until Redis has run
   * it, then resets that client's connection without relaying its reply (nor those of commands
   * sent with it): the client cannot know whether it ran. Commands the client sent after it on
   * that connection are dropped unsent. Resolves with the command once the connection is reset.
   */
  loseReply(match: (command: RedisCommand) => boolean, nth?: number): Promise<RedisCommand>;
  /** Resets every connection now, then resets every new one at once until `ms` have passed. */
  outage(ms: number): Promise<void>;
  /** Resets every connection now (clients reconnect at once). */
  resetAll(): void;
  close(): Promise<void>;
}

/** Whether `command` runs the Lua script `source`: EVALSHA of its SHA1, or EVAL of it. */
export function runsScript(command: RedisCommand, source: string): boolean {
  const name = command[0]?.toLowerCase();
  if (name === 'eval') return command[1] === source;
  return name === 'evalsha' && command[1] === createHash('sha1').update(source).digest('hex');
}

/** The first whole command in `buf` (RESP array or inline) and where it ends, or null if incomplete. */
function parseCommand(buf: Buffer): { command: RedisCommand; end: number } | null {
  const line = (from: number) => {
    const eol = buf.indexOf('\r\n', from);
    return eol < 0 ? null : { text: buf.toString('latin1', from, eol), next: eol + 2 };
  };
  const head = line(0);
  if (!head) return null;
  if (!head.text.startsWith('*')) return { command: head.text.split(' ').filter(Boolean), end: head.next };
  const command: RedisCommand = [];
  let at = head.next;
  for (let i = Number(head.text.slice(1)); i > 0; i--) {
    const size = line(at);
    if (!size) return null;
    const end = size.next + Number(size.text.slice(1));
    if (buf.length < end + 2) return null;
    command.push(buf.toString('utf8', size.next, end));
    at = end + 2;
  }
  return { command, end: at };
}

interface Rule {
  match: (command: RedisCommand) => boolean;
  left: number;
  done: (command: RedisCommand) => void;
}

/** Starts a proxy on a free port in front of the Redis at `target` (`redis://host:port` or a port). */
export async function startRedisProxy(target: string | number): Promise<RedisProxy> {
  const url = new URL(typeof target === 'number' ? `redis://127.0.0.1:${target}` : target);
  const upstreamAt = { host: url.hostname, port: Number(url.port) };
  const pairs = new Set<{ client: Socket; upstream: Socket }>();
  const rules: Rule[] = [];
  let refuseUntil = 0;

  const server = createServer((client) => {
    if (Date.now() < refuseUntil) {
      client.resetAndDestroy();
      return;
    }
    const upstream = connect(upstreamAt.port, upstreamAt.host);
    const pair = { client, upstream };
    pairs.add(pair);
    let pending = Buffer.alloc(0);
    let cut = false;
    const end = () => {
      pairs.delete(pair);
      if (!client.destroyed) client.resetAndDestroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    upstream.on('data', (data) => {
      if (!cut) client.write(data);
    });
    client.on('data', (data) => {
      if (cut) return;
      pending = Buffer.concat([pending, data]);
      let from = 0;
      for (;;) {
        const parsed = parseCommand(pending.subarray(from));
        if (!parsed) break;
        const rule = rules.find((r) => r.match(parsed.command) && --r.left === 0);
        from += parsed.end;
        if (!rule) continue;
        rules.splice(rules.indexOf(rule), 1);
        upstream.write(pending.subarray(0, from));
        cut = true;
        // Redis answers in order: once it echoes the marker, it has run the command before it.
        const marker = randomUUID();
        let replies = '';
        upstream.on('data', (reply) => {
          replies += reply.toString('latin1');
          if (!replies.includes(marker)) return;
          end();
          rule.done(parsed.command);
        });
        upstream.write(`*2\r\n$4\r\nECHO\r\n$${marker.length}\r\n${marker}\r\n`);
        return;
      }
      if (from > 0) upstream.write(pending.subarray(0, from));
      pending = pending.subarray(from);
    });
  });
  const port = await freePort();
  await new Promise<void>((resolve, reject) =>
    server.once('error', reject).listen(port, '127.0.0.1', resolve),
  );

  const resetAll = () => {
    for (const { client, upstream } of pairs) {
      client.resetAndDestroy();
      upstream.destroy();
    }
    pairs.clear();
  };
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    loseReply: (match, nth = 1) =>
      new Promise((done) => {
        rules.push({ match, left: nth, done });
      }),
    outage: async (ms) => {
      refuseUntil = Date.now() + ms;
      resetAll();
      await new Promise((r) => setTimeout(r, ms));
    },
    resetAll,
    close: () =>
      new Promise((resolve) => {
        resetAll();
        server.close(() => resolve());
      }),
  };
}
