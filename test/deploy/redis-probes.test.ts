import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { exited, freePort, until } from '@taskline/testing';
import { CHART, CRDS, render } from './helm-tool.js';
import { pod } from './manifests.js';
import { ROOT } from './promql.js';

// The bundled Redis's probes (the chart's standalone and cluster pods) and the compose stack's
// healthcheck, run as they are written against real redis-servers. `redis-cli ping` exits 0 on
// an error reply too, so a Redis still loading its AOF (LOADING) or refusing the probe's password
// (NOAUTH) read as ready: the services were sent to a Redis that refuses their commands.

const PASSWORD = 'probe-pass';
const dir = mkdtempSync(join(tmpdir(), 'taskline-probes-'));
const servers: ChildProcess[] = [];
let loading = 0; // a Redis that answers LOADING for as long as the tests run
let ready = 0; // a loaded Redis with a password
let nothing = 0; // a port no server listens on

/** A redis-server on a free port, once it answers at all (LOADING counts). */
async function redisServer(name: string, args: string[]): Promise<{ port: number; child: ChildProcess }> {
  const port = await freePort();
  const data = join(dir, name);
  mkdirSync(data, { recursive: true });
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', data, '--save', '', ...args],
    { stdio: 'ignore' },
  );
  servers.push(child);
  await until(`redis-server ${name}`, () => (/PONG|LOADING|NOAUTH/.test(ping(port)) ? true : undefined));
  return { port, child };
}

/** What the server on `port` answers to PING, unauthenticated. */
const ping = (port: number) =>
  spawnSync('redis-cli', ['-p', String(port), 'ping'], { encoding: 'utf8' }).stdout.trim();

before(async () => {
  // An AOF of 50,000 keys, loaded at 2 ms a key (key-load-delay, a debug setting of Redis's own
  // tests): about 100 s of LOADING, well past these tests (each checks that it still loads).
  const seed = await redisServer('loading', ['--appendonly', 'yes']);
  const cli = (...a: string[]) =>
    execFileSync('redis-cli', ['-p', String(seed.port), ...a], { encoding: 'utf8', input: '' });
  execFileSync('redis-cli', ['-p', String(seed.port)], {
    input: Array.from({ length: 50_000 }, (_, i) => `SET k${i} v\n`).join(''),
  });
  // Rewritten into the AOF's base file, which is what key-load-delay slows.
  cli('bgrewriteaof');
  await until('the AOF rewrite', () =>
    /aof_rewrite_in_progress:0\r?\naof_rewrite_scheduled:0/.test(cli('info', 'persistence'))
      ? true
      : undefined,
  );
  seed.child.kill('SIGTERM');
  await exited(seed.child);
  ({ port: loading } = await redisServer('loading', [
    '--appendonly',
    'yes',
    '--key-load-delay',
    '2000',
    '--loading-process-events-interval-bytes',
    '1024',
  ]));
  ({ port: ready } = await redisServer('ready', ['--requirepass', PASSWORD]));
  nothing = await freePort();
});

after(() => {
  for (const s of servers) s.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/**
 * Runs a probe's command as the kubelet or compose would, its `redis-cli` reaching `port`
 * (the pod's own 6379 here is a test port), with the pod's REDISCLI_AUTH.
 */
function probe(command: string[], port: number, auth?: string): boolean {
  if (port === loading) assert.match(ping(loading), /^LOADING/, 'the loading Redis is done loading');
  const bin = join(dir, `bin-${port}`);
  mkdirSync(bin, { recursive: true });
  const real = execFileSync('sh', ['-c', 'command -v redis-cli'], { encoding: 'utf8' }).trim();
  writeFileSync(join(bin, 'redis-cli'), `#!/bin/sh\nexec ${real} -p ${port} "$@"\n`);
  chmodSync(join(bin, 'redis-cli'), 0o755);
  const env: NodeJS.ProcessEnv = { PATH: `${bin}:${process.env.PATH}` };
  if (auth !== undefined) env.REDISCLI_AUTH = auth;
  const [cmd, ...args] = command;
  return spawnSync(cmd!, args, { env, stdio: 'ignore', timeout: 10_000 }).status === 0;
}

interface ExecProbe {
  exec: { command: string[] };
}

for (const [shape, files] of [
  ['standalone', []],
  ['cluster', [`${CHART}/examples/redis-cluster-in-chart.yaml`]],
] as const) {
  test(`chart (${shape}): Redis is ready only on PONG, and alive while it loads its AOF`, () => {
    const redis = pod(render({ files: [...files], apiVersions: CRDS }), 'StatefulSet', 'taskline-redis')
      .containers[0]!;
    const readiness = (redis.readinessProbe as unknown as ExecProbe).exec.command;
    const liveness = (redis.livenessProbe as unknown as ExecProbe).exec.command;
    assert.equal(probe(readiness, ready, PASSWORD), true, 'ready Redis, right password');
    assert.equal(probe(liveness, ready, PASSWORD), true, 'alive Redis, right password');
    assert.equal(probe(readiness, loading, PASSWORD), false, 'LOADING is not ready');
    // A large AOF takes minutes to load: restarting Redis for it would start the load over.
    assert.equal(probe(liveness, loading, PASSWORD), true, 'LOADING is alive');
    assert.equal(probe(readiness, ready, 'wrong'), false, 'NOAUTH is not ready');
    assert.equal(probe(liveness, ready, 'wrong'), false, 'NOAUTH is not alive');
    assert.equal(probe(readiness, nothing, PASSWORD), false, 'no Redis');
    assert.equal(probe(liveness, nothing, PASSWORD), false, 'no Redis');
  });
}

test('compose: the services wait for a Redis that answers PONG, not one still loading', () => {
  const compose = parse(readFileSync(`${ROOT}deploy/compose.yaml`, 'utf8')) as {
    services: { redis: { healthcheck: { test: string[] } } };
  };
  // Compose interpolates $: a lone `$(` is an invalid interpolation, `$$` is a literal `$`.
  const [kind, ...rest] = compose.services.redis.healthcheck.test.map((part) => {
    assert.doesNotMatch(part, /(^|[^$])(\$\$)*\$\(/, 'compose refuses $( : write $$(');
    return part.replaceAll('$$', '$');
  });
  // CMD runs its arguments; CMD-SHELL runs its one string with /bin/sh -c.
  const command = kind === 'CMD-SHELL' ? ['sh', '-c', rest.join(' ')] : rest;
  assert.equal(probe(command, loading), false, 'LOADING is not healthy');
  assert.equal(probe(command, ready, PASSWORD), true, 'loaded Redis');
});
