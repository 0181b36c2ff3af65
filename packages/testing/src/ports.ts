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

/** A TCP port on 127.0.0.1 that was free a moment ago, below the kernel's ephemeral range. */
export async function freePort(): Promise<number> {
  const high = Math.max(LOW + 1000, ephemeralLow());
  for (let tries = 0; tries < 50; tries++) {
    const port = LOW + Math.floor(Math.random() * (high - LOW));
    if (await listens(port)) return port;
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
