// Free ports for test servers, picked below the kernel's ephemeral range.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * The first port the kernel hands out on its own (to outgoing connections, to `listen(0)`), from
 * Linux's `ip_local_port_range`. A port picked below it cannot be taken between the pick and its
 * use by a connection's local end or a listener on port 0, as one the kernel chose could.
 */
function ephemeralLow(): number {
  try {
    return (
      Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 32768
    );
  } catch {
    return 32768;
  }
}

const LOW = 10_000;

/**
 * Every port this process handed out. A caller often picks several before binding any (a cluster
 * node's bus port, then its client port), and a free check alone would hand out one of those twice.
 */
const handedOut = new Set<number>();

/** A TCP port on 127.0.0.1 that was free a moment ago, below the kernel's ephemeral range, never handed out before. */
export async function freePort(): Promise<number> {
  const high = Math.max(LOW + 1000, ephemeralLow());
  for (let tries = 0; tries < 50; tries++) {
    const port = LOW + Math.floor(Math.random() * (high - LOW));
    if (handedOut.has(port) || !(await listens(port))) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error(`no free port found in ${LOW}-${high - 1}`);
}

/** Whether a listener could bind `port` on 127.0.0.1 just now. */
function listens(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

let ipv6: Promise<boolean> | undefined;

/** Whether this host has IPv6 loopback (`::1`): tests that connect over IPv6 skip where it has none. */
export function ipv6Loopback(): Promise<boolean> {
  ipv6 ??= new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(0, '::1', () => server.close(() => resolve(true)));
  });
  return ipv6;
}
