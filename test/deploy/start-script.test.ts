import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { until } from '@taskline/testing';
import { ROOT } from './promql.js';

// scripts/start.sh as it is, in a copy of the checkout's layout whose services, bootstrap,
// redis-server and redis-cli are stand-ins: no port is taken, nothing is built. Each stand-in
// service takes a moment to stop after its signal, as the real ones do while they write their
// drain and step-down to Redis.
const SERVICES = ['scheduler', 'gpu-worker', 'api'];

const service = (name: string) => `
const { writeFileSync } = require('node:fs');
const name = ${JSON.stringify(name)};
writeFileSync(\`started-\${name}\`, '');
const stop = () => setTimeout(() => { writeFileSync(\`exited-\${name}\`, ''); process.exit(0); }, 300);
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
setInterval(() => {}, 1000);
`;

// Records which services had already stopped when Redis was told to stop.
const REDIS_SERVER = `#!/usr/bin/env bash
stop() { ls exited-* 2>/dev/null | tr '\\n' ' ' > redis-stopped; exit 0; }
trap stop INT TERM
while :; do sleep 0.05; done
`;

function checkout(): string {
  const dir = mkdtempSync(join(tmpdir(), 'taskline-start-'));
  mkdirSync(join(dir, 'scripts'));
  mkdirSync(join(dir, 'bin'));
  copyFileSync(join(ROOT, 'scripts/start.sh'), join(dir, 'scripts/start.sh'));
  writeFileSync(join(dir, 'scripts/bootstrap.sh'), 'exit 0\n');
  for (const name of SERVICES) {
    mkdirSync(join(dir, 'services', name, 'dist'), { recursive: true });
    writeFileSync(join(dir, 'services', name, 'dist/main.js'), service(name));
  }
  writeFileSync(join(dir, 'bin/redis-server'), REDIS_SERVER);
  writeFileSync(join(dir, 'bin/redis-cli'), '#!/usr/bin/env bash\necho PONG\n');
  for (const bin of ['redis-server', 'redis-cli']) chmodSync(join(dir, 'bin', bin), 0o755);
  return dir;
}

test('Ctrl-C on pnpm start stops the services before the Redis they write to while stopping', async () => {
  const dir = checkout();
  try {
    const env = { ...process.env, PATH: `${join(dir, 'bin')}:${process.env.PATH}` };
    delete env.REDIS_URL;
    // Its own process group, as a terminal's foreground job: Ctrl-C signals the whole group.
    const child = spawn('bash', ['scripts/start.sh'], { cwd: dir, env, detached: true, stdio: 'ignore' });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    await until('every service to start', () =>
      SERVICES.every((s) => existsSync(join(dir, `started-${s}`))) ? true : undefined,
    );
    process.kill(-child.pid!, 'SIGINT');
    await exited;
    await until('Redis to be stopped', () => (existsSync(join(dir, 'redis-stopped')) ? true : undefined));
    const stoppedFirst = readFileSync(join(dir, 'redis-stopped'), 'utf8').trim().split(/\s+/).filter(Boolean);
    assert.deepEqual(stoppedFirst.toSorted(), SERVICES.map((s) => `exited-${s}`).toSorted());
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
