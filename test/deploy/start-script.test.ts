import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
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
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bounded, exited, freePort, until } from '@taskline/testing';
import { loadEnv } from '@taskline/config';
import { ROOT } from './promql.js';

// scripts/start.sh and scripts/cluster.sh as they are, in a copy of the checkout's layout whose
// services, bootstrap, pnpm, haproxy, redis-server and redis-cli are stand-ins: nothing is built,
// and the only port taken is the one a test holds on purpose. Each stand-in service takes a
// moment to stop after its signal, as the real ones do while they write their drain and
// step-down to Redis.

/** A stand-in service: `started-<name>-<pid>` (its environment) once up, `exited-<name>-<pid>` as it exits. */
const service = (name: string) => `
const { renameSync, writeFileSync } = require('node:fs');
const me = ${JSON.stringify(name)} + '-' + process.pid;
const stop = () => setTimeout(() => { writeFileSync('exited-' + me, ''); process.exit(0); }, 300);
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
// Announced once it handles signals (the tests signal it as soon as they see the file), whole.
writeFileSync('.started-' + me, JSON.stringify(process.env));
renameSync('.started-' + me, 'started-' + me);
setInterval(() => {}, 1000);
`;

/**
 * Runs until signalled (its pid kept in `daemons`, since Redis runs in a session of its own that
 * a signal to the script's group misses); redis-server also records which services had stopped.
 */
const daemon = (onStop: string) => `#!/usr/bin/env bash
echo $$ >> daemons
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

function checkout(script: string, bins: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'taskline-start-'));
  for (const sub of ['scripts', 'bin', '.data']) mkdirSync(join(dir, sub));
  for (const file of [script, 'local-stack.sh'])
    copyFileSync(join(ROOT, 'scripts', file), join(dir, 'scripts', file));
  writeFileSync(join(dir, 'scripts/bootstrap.sh'), 'exit 0\n');
  for (const name of ['scheduler', 'gpu-worker', 'api']) {
    mkdirSync(join(dir, 'services', name, 'dist'), { recursive: true });
    writeFileSync(join(dir, 'services', name, 'dist/main.js'), service(name));
  }
  for (const [bin, text] of Object.entries({ ...BIN, ...bins })) {
    writeFileSync(join(dir, 'bin', bin), text);
    chmodSync(join(dir, 'bin', bin), 0o755);
  }
  return dir;
}

/** Where each script's own Redis listens (a free port: 6390 and 6391 may be a developer's). */
const PORT_VAR = { 'start.sh': 'TASKLINE_START_REDIS_PORT', 'cluster.sh': 'TASKLINE_CLUSTER_REDIS_PORT' };

interface Run {
  child: ChildProcess;
  exit: Promise<number | NodeJS.Signals | null>;
  stderr: () => string;
}

/** Runs `script` in `dir` in a process group of its own, as a terminal's foreground job. */
function run(dir: string, script: keyof typeof PORT_VAR, env: NodeJS.ProcessEnv): Run {
  const full: NodeJS.ProcessEnv = { ...process.env, PATH: `${join(dir, 'bin')}:${process.env.PATH}`, ...env };
  delete full.REDIS_URL;
  const child = spawn('bash', [`scripts/${script}`], {
    cwd: dir,
    env: full,
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  return { child, exit: exited(child), stderr: () => stderr };
}

/** Ends what a run left (a script that never exits on its own fails its test, not the suite). */
function reap(dir: string, r: Run) {
  if (r.child.exitCode === null && r.child.signalCode === null) process.kill(-r.child.pid!, 'SIGKILL');
  const daemons = existsSync(join(dir, 'daemons')) ? readFileSync(join(dir, 'daemons'), 'utf8') : '';
  for (const pid of daemons.split(/\s+/).filter(Boolean)) {
    try {
      process.kill(Number(pid), 'SIGKILL');
    } catch {
      // already stopped by the script
    }
  }
  rmSync(dir, { recursive: true, force: true });
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
    const r = run(dir, script, { [PORT_VAR[script]]: String(await freePort()) });
    try {
      await until('every service to start', () =>
        services(readdirSync(dir), 'started').length === expected.length ? true : undefined,
      );
      process.kill(-r.child.pid!, 'SIGINT');
      await r.exit;
      await until('Redis to be stopped', () => (existsSync(join(dir, 'redis-stopped')) ? true : undefined));
      const stoppedFirst = readFileSync(join(dir, 'redis-stopped'), 'utf8').trim().split(/\s+/);
      assert.deepEqual(services(stoppedFirst, 'exited'), expected);
    } finally {
      reap(dir, r);
    }
  });

  // Whatever answered there (another checkout's Redis, someone's server) would have been used
  // as this stack's Redis: its data, its settings, and gone when its owner stops it.
  test(`${script} refuses a Redis port that another program already holds`, async () => {
    const taken = createServer((socket) => socket.on('data', () => socket.write('+PONG\r\n')));
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    const dir = checkout(script);
    const r = run(dir, script, { [PORT_VAR[script]]: String(port) });
    try {
      assert.notEqual(await bounded(`${script} to refuse`, 20_000, r.exit), 0);
      assert.match(r.stderr(), new RegExp(`port ${port} is taken.*${PORT_VAR[script]}`, 's'));
      assert.deepEqual(services(readdirSync(dir), 'started'), [], 'no service started');
    } finally {
      reap(dir, r);
      taken.close();
    }
  });
}

test('start.sh gives up with a clear error when its redis-server exits or never answers', async () => {
  const refused = '#!/usr/bin/env bash\necho "Could not connect to Redis" >&2\nexit 1\n';
  for (const [what, redisServer, message] of [
    ['exits', '#!/usr/bin/env bash\necho "bind: Address in use" >&2\nexit 1\n', /redis-server .*exited/],
    ['hangs', BIN['redis-server']!, /did not answer within 10 s/],
  ] as const) {
    const dir = checkout('start.sh', { 'redis-server': redisServer, 'redis-cli': refused });
    const r = run(dir, 'start.sh', { TASKLINE_START_REDIS_PORT: String(await freePort()) });
    try {
      assert.notEqual(await bounded(`start.sh to give up (${what})`, 30_000, r.exit), 0, what);
      assert.match(r.stderr(), message, what);
      assert.deepEqual(services(readdirSync(dir), 'started'), [], `${what}: no service started`);
    } finally {
      reap(dir, r);
    }
  }
});

// A user who moves the scheduler's control port (say 7070 is taken) must not leave the worker
// dialling the default one: it would never report its slots, and no task would be dispatched.
test("start.sh's worker dials the scheduler on the control port the user set", async () => {
  const dir = checkout('start.sh');
  const control = await freePort();
  const r = run(dir, 'start.sh', {
    TASKLINE_START_REDIS_PORT: String(await freePort()),
    TASKLINE_CONTROL_PORT: String(control),
  });
  try {
    const started = await until('every service to start', () => {
      const files = readdirSync(dir).filter((f) => f.startsWith('started-'));
      return files.length === 3 ? files : undefined;
    });
    const settings = (name: string) => {
      const file = started.find((f) => f.startsWith(`started-${name}-`))!;
      return loadEnv(JSON.parse(readFileSync(join(dir, file), 'utf8')) as NodeJS.ProcessEnv);
    };
    assert.equal(settings('scheduler').TASKLINE_CONTROL_PORT, control);
    assert.deepEqual(settings('gpu-worker').TASKLINE_SCHEDULER_ADDR, `127.0.0.1:${control}`);
    // The control plane admits the worker: both hold the token start.sh made for this checkout.
    const token = readFileSync(join(dir, '.data/control-token'), 'utf8').trim();
    assert.ok(token.length >= 32, 'token.length >= 32');
    for (const name of ['scheduler', 'gpu-worker']) {
      assert.equal(settings(name).TASKLINE_CONTROL_TOKEN, token, name);
      assert.equal(settings(name).TASKLINE_CONTROL_PLAINTEXT, true, name);
    }
  } finally {
    reap(dir, r);
  }
});
