import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createLogger, REDACTED, type LogLevel } from '../src/index.js';

const SECRETS = ['hunter2', 'tl_live_abc', 'eyJhbGciOi.payload.sig', 'sk-sess', 'pw-in-error', 'cookie-v'];

function capture(base: Record<string, unknown> = { service: 'test' }, level: LogLevel = 'debug') {
  const lines: string[] = [];
  const log = createLogger(base, level, (line) => lines.push(line));
  return { log, lines, events: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

test('credentials never reach a line: fields named like one, URL passwords, bearer tokens', () => {
  const { log, lines, events } = capture({ service: 'api', redis: 'redis://default:hunter2@redis:6379/0' });
  log.info('request', {
    headers: {
      authorization: 'Bearer eyJhbGciOi.payload.sig',
      'x-api-key': 'tl_live_abc',
      cookie: 'cookie-v',
    },
    apiKey: 'tl_live_abc',
    upstream: { token: 'sk-sess', url: 'rediss://:hunter2@cache:6380' },
    tenant: 'tenant-a',
  });
  log.child({ password: 'hunter2' }).warn('Authorization: Bearer sk-sess refused', {
    err: new Error('connect to redis://u:pw-in-error@h:1 failed'),
  });
  assert.equal(lines.length, 2);
  for (const line of lines)
    for (const secret of SECRETS) assert.ok(!line.includes(secret), `${secret} in ${line}`);
  const [request, refused] = events();
  assert.equal(request!.redis, `redis://default:${REDACTED}@redis:6379/0`);
  assert.deepEqual(request!.headers, { authorization: REDACTED, 'x-api-key': REDACTED, cookie: REDACTED });
  assert.equal(request!.apiKey, REDACTED);
  assert.deepEqual(request!.upstream, { token: REDACTED, url: `rediss://:${REDACTED}@cache:6380` });
  // What is no credential stays readable.
  assert.equal(request!.tenant, 'tenant-a');
  assert.equal(refused!.password, REDACTED);
  assert.equal(refused!.msg, `Authorization: Bearer ${REDACTED} refused`);
  assert.deepEqual(refused!.err, { name: 'Error', message: `connect to redis://u:${REDACTED}@h:1 failed` });
});

test('a bearer token is redacted whole, whatever visible characters a static key holds', () => {
  // TASKLINE_API_KEYS takes any visible characters but commas: the token ends at white space.
  const { log, lines, events } = capture();
  log.warn('Authorization: Bearer k3y!with#odd$chars;and"quotes refused');
  assert.ok(!lines[0]!.includes('with#odd'), lines[0]);
  assert.equal(events()[0]!.msg, `Authorization: Bearer ${REDACTED} refused`);
});

test('a field named like a credential is redacted in nested objects too, not only at the top and in headers', () => {
  const { log, lines, events } = capture();
  log.info('tool call', { call: { params: { arguments: { password: 'hunter2', city: 'Oslo' } } } });
  assert.ok(!lines[0]!.includes('hunter2'), lines[0]);
  assert.deepEqual(events()[0]!.call, { params: { arguments: { password: REDACTED, city: 'Oslo' } } });
});

test('one JSON event a line: level by name, ISO time, base and child fields, the message', () => {
  const { log, events } = capture({ service: 'scheduler', scheduler: 's1' });
  const error = Object.assign(new Error('no Redis'), { code: 'ECONNREFUSED' });
  log.child({ task: 'task_1' }).error('attempt_failed', { error, attempt: 2 });
  const [event] = events();
  assert.deepEqual(
    { ...event, ts: undefined },
    {
      level: 'error',
      ts: undefined,
      service: 'scheduler',
      scheduler: 's1',
      task: 'task_1',
      error: { name: 'Error', message: 'no Redis', code: 'ECONNREFUSED' },
      attempt: 2,
      msg: 'attempt_failed',
    },
  );
  assert.match(String(event!.ts), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
});

test('events below the level are dropped', () => {
  const { log, events } = capture({ service: 'x' }, 'warn');
  log.debug('d');
  log.info('i');
  log.warn('w');
  log.child({ c: 1 }).error('e');
  assert.deepEqual(
    events().map((e) => [e.level, e.msg]),
    [
      ['warn', 'w'],
      ['error', 'e'],
    ],
  );
});

test('on stdout by default: each event its own line, written before the process exits', () => {
  const dist = fileURLToPath(new URL('../dist/index.js', import.meta.url));
  const script = `
    const { createLogger } = await import(${JSON.stringify(dist)});
    const log = createLogger({ service: 'cli' }, 'info', { bufferBytes: 1 << 20 });
    for (let i = 0; i < 3; i++) log.info('event', { i, note: 'a\\nb' });
    process.exit(0);`;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  const lines = run.stdout.split('\n');
  assert.equal(lines.pop(), '');
  assert.deepEqual(
    lines.map((l) => (JSON.parse(l) as { i: number; note: string }).i),
    [0, 1, 2],
  );
});

test('stdout lines go out in order across turns, and none is lost to an uncaught exception or an exit handler', () => {
  const dist = fileURLToPath(new URL('../dist/index.js', import.meta.url));
  const script = `
    const { createLogger } = await import(${JSON.stringify(dist)});
    const log = createLogger({ service: 'cli' }, 'info', { bufferBytes: 1 << 20 });
    const child = log.child({ part: 'child' });
    process.on('exit', () => log.info('event', { i: 4 }));
    log.info('event', { i: 0 });
    child.info('event', { i: 1 });
    await new Promise((r) => setImmediate(r));
    log.info('event', { i: 2 });
    setTimeout(() => {
      child.info('event', { i: 3 });
      throw new Error('boom');
    }, 5);`;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.equal(run.status, 1, run.stderr);
  assert.match(run.stderr, /boom/);
  const lines = run.stdout.split('\n');
  assert.equal(lines.pop(), '');
  assert.deepEqual(
    lines.map((l) => (JSON.parse(l) as { i: number }).i),
    [0, 1, 2, 3, 4],
  );
});
