/** A TCP proxy in front of one Redis that tests break on purpose: lost replies, outages, resets. */
import { createHash } from 'node:crypto';
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
   * Lets the `nth` command (1 = the next) matching `match` reach Redis, relays the replies to the
   * commands before it, and once Redis has answered it resets that client's connection instead of
   * relaying its reply: the client cannot know whether it ran. Commands the client sent after it
   * are dropped unsent. Resolves with the command once the connection is reset. (Replies are
   * counted in order: not for a connection in subscribe mode.)
   * `nth` defaults to 1; with `outageMs`, every connection is then reset and new ones refused for
   * that long, as by `outage` (a client that gives up on the command meanwhile saw it fail, though
   * it ran).
   */
  loseReply(
    match: (command: RedisCommand) => boolean,
    options?: { nth?: number; outageMs?: number },
  ): Promise<RedisCommand>;
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

/** Where the reply that starts at `at` ends (RESP2 and RESP3), or -1 while it is incomplete. */
function replyEnd(buf: Buffer, at: number): number {
  const eol = buf.indexOf('\r\n', at);
  if (eol < 0) return -1;
  const type = String.fromCharCode(buf[at]!);
  const size = Number(buf.toString('latin1', at + 1, eol));
  if ('$=!'.includes(type)) {
    if (size < 0) return eol + 2;
    return buf.length < eol + 4 + size ? -1 : eol + 4 + size;
  }
  const items = '*~>'.includes(type) ? size : type === '%' || type === '|' ? 2 * size : 0;
  let next = eol + 2;
  for (let i = 0; i < items && next > 0; i++) next = replyEnd(buf, next);
  // An attribute (`|`) comes before the reply it describes.
  return type === '|' && next > 0 ? replyEnd(buf, next) : next;
}

interface Rule {
  match: (command: RedisCommand) => boolean;
  left: number;
  outageMs: number;
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
    // Commands forwarded and replies relayed so far; Redis answers in order, so the n-th reply is
    // the n-th command's. `cut`: the number of the command whose reply is to be lost.
    let sent = 0;
    let relayed = 0;
    let replies = Buffer.alloc(0);
    let cut: { at: number; rule: Rule; command: RedisCommand } | null = null;
    const reset = () => {
      pairs.delete(pair);
      if (!client.destroyed) client.resetAndDestroy();
      upstream.destroy();
    };
    // A close on either side is passed on as it came: a reset as a reset, an end as an end.
    client.on('error', reset).on('close', () => reset());
    upstream.on('error', reset).on('end', () => client.end());
    upstream.on('data', (data) => {
      replies = Buffer.concat([replies, data]);
      let from = 0;
      for (let next = replyEnd(replies, 0); next > 0; next = replyEnd(replies, from)) {
        if (cut && relayed + 1 === cut.at) {
          // Redis ran the command and answered: the client never learns it.
          const { rule, command } = cut;
          // Reset once the replies before it are out, and on a later turn: a reset from within the
          // write's callback goes out as a plain close (FIN).
          client.write(replies.subarray(0, from), () =>
            setTimeout(() => {
              if (rule.outageMs > 0) startOutage(rule.outageMs);
              reset();
              rule.done(command);
            }, 0),
          );
          upstream.pause();
          return;
        }
        relayed++;
        from = next;
      }
      if (from > 0) client.write(replies.subarray(0, from));
      replies = replies.subarray(from);
    });
    client.on('data', (data) => {
      if (cut) return;
      pending = Buffer.concat([pending, data]);
      let from = 0;
      for (;;) {
        const parsed = parseCommand(pending.subarray(from));
        if (!parsed) break;
        from += parsed.end;
        sent++;
        const rule = rules.find((r) => r.match(parsed.command) && --r.left === 0);
        if (!rule) continue;
        rules.splice(rules.indexOf(rule), 1);
        // What the client sent after it is dropped: it never reached Redis.
        cut = { at: sent, rule, command: parsed.command };
        break;
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
  function startOutage(ms: number): void {
    refuseUntil = Date.now() + ms;
    resetAll();
  }
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    loseReply: (match, { nth = 1, outageMs = 0 } = {}) =>
      new Promise((done) => {
        rules.push({ match, left: nth, outageMs, done });
      }),
    outage: async (ms) => {
      startOutage(ms);
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
