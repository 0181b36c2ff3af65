import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { until } from '@taskline/testing';
import { ROOT } from './promql.js';

// scripts/start.sh and scripts/cluster.sh as they are, in a copy of the checkout's layout whose
// services, bootstrap, pnpm, haproxy, redis-server and redis-cli are stand-ins: no port is taken,
// nothing is built. Each stand-in service takes a moment to stop after its signal, as the real ones
// do while they write their drain and step-down to Redis.

/** A stand-in service: `started-<name>-<pid>` once up, `exited-<name>-<pid>` as it exits. */
const service = (name: string) => `
const { writeFileSync } = require('node:fs');
const me = ${JSON.stringify(name)} + '-' + process.pid;
writeFileSync('started-' + me, '');
const stop = () => setTimeout(() => { writeFileSync('exited-' + me, ''); process.exit(0); }, 300);
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
setInterval(() => {}, 1000);
`;

/** Runs until signalled; redis-server also records which services had stopped by then. */
const daemon = (onStop: string) => `#!/usr/bin/env bash
stop() { ${onStop} exit 0; }
trap stop INT TERM
while :; do sleep 0.05; done
`;

const BIN: Record<string, string> = {
  'redis-server': daemon("ls exited-* 2>/dev/null | tr '\\n' ' ' > redis-stopped;"),
  'redis-cli': '#!/usr/bin/env bash\necho PONG\n',
  haproxy: daemon(''),
  pnpm: '#!/usr/bin/env bash\nexit 0\n',
};

function checkout(script: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'taskline-start-'));
  for (const sub of ['scripts', 'bin', '.data']) mkdirSync(join(dir, sub));
  for (const file of [script, 'local-stack.sh'])
    copyFileSync(join(ROOT, 'scripts', file), join(dir, 'scripts', file));
  writeFileSync(join(dir, 'scripts/bootstrap.sh'), 'exit 0\n');
  for (const name of ['scheduler', 'gpu-worker', 'api']) {
    mkdirSync(join(dir, 'services', name, 'dist'), { recursive: true });
    writeFileSync(join(dir, 'services', name, 'dist/main.js'), service(name));
  }
  for (const [bin, text] of Object.entries(BIN)) {
    writeFileSync(join(dir, 'bin', bin), text);
    chmodSync(join(dir, 'bin', bin), 0o755);
  }
  return dir;
}

/** The service names of the files `prefix-<name>-<pid>` in `names`, sorted. */
const services = (names: string[], prefix: string) =>
  names
    .filter((f) => f.startsWith(`${prefix}-`))
    .map((f) => f.slice(prefix.length + 1).replace(/-\d+$/, ''))
    .toSorted();

for (const [script, expected] of [
  ['start.sh', ['api', 'gpu-worker', 'scheduler']],
  ['cluster.sh', ['api', 'api', 'gpu-worker', 'gpu-worker', 'scheduler', 'scheduler']],
] as const) {
  test(`Ctrl-C on ${script} stops the services before the Redis they write to while stopping`, async () => {
    const dir = checkout(script);
    try {
      const env = { ...process.env, PATH: `${join(dir, 'bin')}:${process.env.PATH}` };
      delete env.REDIS_URL;
      // Its own process group, as a terminal's foreground job: Ctrl-C signals the whole group.
      const child = spawn('bash', [`scripts/${script}`], { cwd: dir, env, detached: true, stdio: 'ignore' });
      const exited = new Promise((resolve) => child.once('exit', resolve));
      await until('every service to start', () =>
        services(readdirSync(dir), 'started').length === expected.length ? true : undefined,
      );
      process.kill(-child.pid!, 'SIGINT');
      await exited;
      await until('Redis to be stopped', () => (existsSync(join(dir, 'redis-stopped')) ? true : undefined));
      const stoppedFirst = readFileSync(join(dir, 'redis-stopped'), 'utf8').trim().split(/\s+/);
      assert.deepEqual(services(stoppedFirst, 'exited'), expected);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
