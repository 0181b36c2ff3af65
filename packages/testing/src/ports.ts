// Free ports for test servers, picked below the kernel's ephemeral range.
import { mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

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

/**
 * A TCP port on 127.0.0.1 that was free a moment ago, below the kernel's ephemeral range, never
 * handed out before by this process nor held by another one that runs (see `reserve`).
 */
export async function freePort(): Promise<number> {
  const high = Math.max(LOW + 1000, ephemeralLow());
  for (let tries = 0; tries < 50; tries++) {
    const port = LOW + Math.floor(Math.random() * (high - LOW));
    if (handedOut.has(port) || !(await listens(port)) || !reserve(port)) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error(`no free port found in ${LOW}-${high - 1}`);
}

/** One file a port, naming the process that holds it: test files run side by side, each its own process. @internal */
export const RESERVED = join(tmpdir(), 'taskline-ports');

/**
 * Claims `port` for this process among all that use this module at once. A port stays free while
 * its server is down (a test restarting Redis), and another process's free check alone would hand
 * it out then, which left the restarted server no port. A claim whose process is gone is taken over.
 */
function reserve(port: number): boolean {
  const file = join(RESERVED, String(port));
  mkdirSync(RESERVED, { recursive: true });
  try {
    writeFileSync(file, String(process.pid), { flag: 'wx' });
  } catch {
    let text: string;
    try {
      text = readFileSync(file, 'utf8').trim();
    } catch {
      return false; // given back meanwhile: the next pick tries another port
    }
    // Empty: its holder may be between creating it and writing its pid.
    const holder = Number(text || NaN);
    if (!Number.isInteger(holder) || alive(holder)) return false;
    writeFileSync(file, String(process.pid));
  }
  if (reserved.size === 0) process.once('exit', release);
  reserved.add(file);
  return true;
}

const reserved = new Set<string>();

/** Gives this process's claims back as it exits (those of one that died are taken over instead). */
function release(): void {
  for (const file of reserved)
    try {
      if (readFileSync(file, 'utf8') === String(process.pid)) unlinkSync(file);
    } catch {
      // Gone already.
    }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: a process of another user holds that pid: alive all the same.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
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
