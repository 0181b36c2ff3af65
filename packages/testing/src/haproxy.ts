// HAProxy in front of two api replicas, as `scripts/cluster.sh` runs it.
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './ports.js';
import { ROOT } from './service.js';

/** A running HAProxy of the local cluster's shape, and its address. */
export interface LoadBalancer {
  child: ChildProcess;
  port: number;
  /** `http://127.0.0.1:<port>` */
  lb: string;
}

/**
 * HAProxy as `scripts/cluster.sh` runs it (deploy/haproxy/haproxy.cfg, or `config`, a path from the
 * repository root or absolute) in front of two api replicas on a free port; resolves once
 * `/healthz` answers through it. `log`: a file for its log (one line per request and per check
 * that changes a server's state), appended to.
 */
export async function startHaproxy(
  apiPorts: readonly [number, number],
  options: { config?: string; log?: string } = {},
): Promise<LoadBalancer> {
  const port = await freePort();
  const child = spawn('haproxy', ['-W', '-db', '-f', options.config ?? 'deploy/haproxy/haproxy.cfg'], {
    cwd: ROOT,
    env: {
      ...process.env,
      TASKLINE_LB_HOST: '127.0.0.1',
      TASKLINE_LB_PORT: String(port),
      TASKLINE_API1_PORT: String(apiPorts[0]),
      TASKLINE_API2_PORT: String(apiPorts[1]),
    },
    stdio: ['ignore', 'ignore', options.log ? openSync(options.log, 'a') : 'ignore'],
  });
  // A missing binary is an 'error' event, which would otherwise end the run with its processes left running.
  let failed: Error | null = null;
  child.once('error', (err) => (failed = err));
  const lb = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const status = await fetch(`${lb}/healthz`).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) break;
    if (failed) throw new Error(`HAProxy did not start (${String(failed)}); \`pnpm setup\` installs it`);
    if (i > 100 || child.exitCode !== null) {
      child.kill('SIGKILL');
      throw new Error(`HAProxy did not come up on ${lb}`);
    }
    await sleep(100);
  }
  return { child, port, lb };
}
