/**
 * The CLI against a running stack, as a user runs it: the built `taskline` as a child process.
 * The cancel tests, which need a second CLI start to beat a running task, are cli-cancel.test.ts.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { credentialId } from '@taskline/client';
import { EXIT, runCli, SqliteTaskIdStore } from '../src/index.js';
import { KEY_A, LOADED_MODULES_PRELOAD, until } from '@taskline/test-support/client-stack';
import { longArgs, retryArgs, useCliStack } from './spawn.js';

const { ctx, cli, finished } = useCliStack();

/** An HTTP proxy to the stack's api that records each request's method and path. */
async function recordingProxy(t: {
  after(fn: () => void): void;
}): Promise<{ url: string; requests: string[] }> {
  const requests: string[] = [];
  const target = new URL(ctx.stack.base);
  const server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    const upstream = request(
      { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => server.close());
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests };
}

describe('taskline CLI against a running stack', () => {
  test('run --json follows the event stream (no polling) and prints the final task', async (t) => {
    const proxy = await recordingProxy(t);
    const r = await finished(['--json', 'run', '--max-output-tokens', '40', 'Hello there.'], {
      TASKLINE_URL: proxy.url,
    });
    assert.equal(r.code, EXIT.ok, r.stderr);
    const task = JSON.parse(r.stdout) as { id: string; status: string };
    assert.equal(task.status, 'succeeded');
    const reads = (path: string) => proxy.requests.filter((q) => q.split('?')[0] === `GET ${path}`).length;
    assert.equal(reads(`/lmsp/v1/tasks/${task.id}/events`), 1, proxy.requests.join('\n'));
    assert.ok(reads(`/lmsp/v1/tasks/${task.id}`) <= 1, `polled:\n${proxy.requests.join('\n')}`);
  });

  test('run streams the text to stdout and exits 0; tasks get --json prints the same response', async () => {
    const r = await finished(['run', '--max-output-tokens', '12', 'Hello there.']);
    assert.equal(r.code, EXIT.ok, r.stderr);
    const id = /task (task_\S+)/.exec(r.stderr)![1]!;
    const got = await finished(['--json', 'tasks', 'get', id]);
    assert.equal(got.code, EXIT.ok);
    const task = JSON.parse(got.stdout) as {
      status: string;
      response: { output: { content: { text: string }[] }[] };
    };
    assert.equal(task.status, 'succeeded');
    assert.equal(r.stdout, task.response.output[0]!.content[0]!.text + '\n');
  });

  for (const times of [1, 2]) {
    test(`run prints exactly the final text of a retry task interrupted ${times}x`, async () => {
      const run = cli(retryArgs);
      const id = await until('the task id on stderr', () => /task (task_\S+)/.exec(run.stderr)?.[1]);
      await ctx.stack.interrupt(id, times);
      assert.equal(await run.done, EXIT.ok, run.stderr);
      const got = await finished(['--json', 'tasks', 'get', id]);
      const task = JSON.parse(got.stdout) as {
        status: string;
        response: { output: { content: { text: string }[] }[] };
      };
      assert.equal(task.status, 'succeeded');
      assert.equal(run.stdout, task.response.output[0]!.content[0]!.text + '\n');
    });
  }

  test('a CLI killed mid-task is followed again by tasks resume, with no text lost', async () => {
    const state = join(ctx.dir, 'crash.db');
    const run = cli(longArgs, { TASKLINE_STATE: state });
    await until('some streamed text', () => (run.stdout.length > 20 ? true : undefined));
    run.child.kill('SIGKILL');
    await run.done;
    const before = run.stdout;
    const id = /task (task_\S+)/.exec(run.stderr)![1]!;
    const store = new SqliteTaskIdStore(state);
    const entry = store.byTaskId(id);
    store.close();
    assert.ok(entry && !entry.done && entry.lastEventId > 0, 'the task id and stream position are on disk');

    const resumed = await finished(['tasks', 'resume'], { TASKLINE_STATE: state });
    assert.equal(resumed.code, EXIT.ok, resumed.stderr);
    assert.match(resumed.stderr, new RegExp(`resuming ${id}`));
    const got = await finished(['--json', 'tasks', 'get', id]);
    const full = (JSON.parse(got.stdout) as { response: { output: { content: { text: string }[] }[] } })
      .response.output[0]!.content[0]!.text;
    const after = resumed.stdout.replace(/\n$/, '');
    // At least once: the delta being written when the CLI died may be printed again.
    assert.ok(full.startsWith(before), 'what run printed is the start of the response');
    assert.ok(full.endsWith(after), 'resume printed the rest');
    assert.ok(before.length + after.length >= full.length, 'nothing in between was lost');
    assert.ok(after.length > 0, 'after.length > 0');

    const again = await finished(['tasks', 'resume'], { TASKLINE_STATE: state });
    assert.equal(again.code, EXIT.ok);
    assert.match(again.stderr, /no unfinished tasks/);
  });

  test('a refused create never replaces an entry, and resume goes past a create refused for good', async () => {
    const state = join(ctx.dir, 'reuse.db');
    const env = { TASKLINE_STATE: state };
    const run = cli(['run', '--idempotency-key', 'long-1', ...longArgs.slice(1)], env);
    const id = await until('the task id on stderr', () => /task (task_\S+)/.exec(run.stderr)?.[1]);
    run.child.kill('SIGINT');
    assert.equal(await run.done, EXIT.interrupted);
    const reused = await finished(['run', '--idempotency-key', 'long-1', 'other'], env);
    assert.equal(reused.code, EXIT.refused, reused.stderr);
    assert.match(reused.stderr, /idempotency_key_reused/);
    const unknownModel = await finished(['run', '--model', 'nope', 'Hi.'], env);
    assert.equal(unknownModel.code, EXIT.refused);
    const store = new SqliteTaskIdStore(state);
    const scope = { endpoint: ctx.stack.base, credential: credentialId(KEY_A) };
    const entry = store.get('long-1', scope);
    assert.equal(entry?.taskId, id, 'the first task is still tracked');
    assert.deepEqual(
      store.unfinished(scope).map((e) => e.key),
      ['long-1'],
      'a refused create leaves nothing to resume',
    );
    // What an older CLI left: a create never answered that the server now refuses for good.
    store.put({
      ...entry!,
      key: 'gone-model',
      taskId: null,
      request: { type: 'response', input: { model: 'nope', input: 'Hi.' } },
      status: 'creating',
      lastEventId: 0,
      createdAt: entry!.createdAt - 1,
    });
    store.close();
    const resumed = await finished(['tasks', 'resume'], env);
    assert.match(resumed.stderr, /gone-model: not created: .*model_not_found/);
    assert.match(resumed.stderr, new RegExp(`resuming ${id}`), 'the entry after it is still followed');
    assert.equal(resumed.code, EXIT.refused, resumed.stderr);
    const again = await finished(['tasks', 'resume'], env);
    assert.match(again.stderr, /no unfinished tasks/);
    assert.equal(again.code, EXIT.ok);
  });

  test("the task store is per credential: another tenant's key neither follows nor touches an entry", async () => {
    const env = { TASKLINE_STATE: join(ctx.dir, 'tenants.db') };
    const created = await finished(['--json', 'keys', 'create', '--tenant', 'tenant-b'], env);
    const asB = { ...env, TASKLINE_API_KEY: (JSON.parse(created.stdout) as { key: string }).key };
    const run = cli(['run', '--idempotency-key', 'shared-1', ...longArgs.slice(1)], env);
    const id = await until('the task id on stderr', () => /task (task_\S+)/.exec(run.stderr)?.[1]);
    run.child.kill('SIGINT');
    assert.equal(await run.done, EXIT.interrupted);
    const other = await finished(['tasks', 'resume'], asB);
    assert.equal(other.code, EXIT.ok, other.stderr);
    assert.match(other.stderr, /no unfinished tasks/);
    // The same Idempotency-Key under tenant B is B's own task and entry.
    const bRun = await finished(
      ['run', '--idempotency-key', 'shared-1', '--max-output-tokens', '2', 'Hi.'],
      asB,
    );
    assert.equal(bRun.code, EXIT.ok, bRun.stderr);
    const store = new SqliteTaskIdStore(env.TASKLINE_STATE);
    const entry = store.get('shared-1', { endpoint: ctx.stack.base, credential: credentialId(KEY_A) });
    store.close();
    assert.ok(entry?.taskId === id && !entry.done, `A's entry is untouched: ${JSON.stringify(entry)}`);
    // What an older CLI left: the entry without its credential. B cannot read A's task, so
    // leaves it; A can, and follows it.
    const db = new Database(env.TASKLINE_STATE);
    db.prepare('UPDATE tasks SET credential = NULL WHERE task_id = ?').run(id);
    db.close();
    assert.match((await finished(['tasks', 'resume'], asB)).stderr, /no unfinished tasks/);
    const resumed = await finished(['tasks', 'resume'], env);
    assert.equal(resumed.code, EXIT.ok, resumed.stderr);
    assert.match(resumed.stderr, new RegExp(`resuming ${id}`));
  });

  test('a reader that closes stdout (taskline run … | head) ends the CLI quietly, 141, the task running on', async () => {
    const run = cli(longArgs);
    await until('some streamed text', () => (run.stdout.length > 5 ? true : undefined));
    run.child.stdout!.destroy(); // what head does once it has its lines
    const code = await run.done;
    assert.doesNotMatch(run.stderr, /\n\s+at |EPIPE/, `no stack trace: ${run.stderr}`);
    assert.equal(code, EXIT.stdoutClosed, run.stderr);
    const id = /task (task_\S+)/.exec(run.stderr)![1]!;
    const got = await finished(['--json', 'tasks', 'get', id]);
    assert.notEqual((JSON.parse(got.stdout) as { status: string }).status, 'cancelled');
    await finished(['tasks', 'cancel', id]);
  });

  test('run - sends the prompt read from stdin as written, a character split between reads included', async () => {
    const state = join(ctx.dir, 'stdin.db');
    const prompt = 'Résumé: 日本語';
    const bytes = Buffer.from(prompt);
    const cut = bytes.indexOf(Buffer.from('本')) + 1; // inside the three bytes of 本
    // In process: a child reads a pipe only once started, by when both writes are one read.
    const stdin = new PassThrough();
    let stderr = '';
    const err = new PassThrough().on('data', (d) => (stderr += d));
    const running = runCli(['run', '--max-output-tokens', '2', '-'], {
      stdout: new PassThrough().resume(),
      stderr: err,
      stdin,
      env: {
        XDG_CONFIG_HOME: ctx.dir,
        TASKLINE_URL: ctx.stack.base,
        TASKLINE_API_KEY: KEY_A,
        TASKLINE_STATE: state,
      },
    });
    stdin.write(bytes.subarray(0, cut));
    await new Promise((resolve) => setTimeout(resolve, 50));
    stdin.end(bytes.subarray(cut));
    assert.equal(await running, EXIT.ok, stderr);
    const id = /task (task_\S+)/.exec(stderr)![1]!;
    // What the server stored: the CLI's state file keeps no prompt of a created task.
    const sent = (await ctx.stack.tasks.get(id))?.request as { input: string };
    assert.equal(sent.input, prompt);
  });

  test('the state file keeps no prompt once its task exists, nor a finished task past the retention', async () => {
    const state = join(ctx.dir, 'retention.db');
    const prompt = `A prompt to forget ${Date.now()}.`;
    const run = await finished(['run', '--max-output-tokens', '2', prompt], { TASKLINE_STATE: state });
    assert.equal(run.code, EXIT.ok, run.stderr);
    const id = /task (task_\S+)/.exec(run.stderr)![1]!;
    for (const file of readdirSync(ctx.dir).filter((f) => f.startsWith('retention.db')))
      assert.ok(!readFileSync(join(ctx.dir, file)).includes(prompt), `${file} holds no prompt`);
    // Kept while the server keeps the task (it resolves a reused Idempotency-Key, say)…
    const kept = await finished(['tasks', 'resume'], { TASKLINE_STATE: state });
    assert.match(kept.stderr, /no unfinished tasks/);
    const db = new Database(state);
    const count = () =>
      (db.prepare('SELECT COUNT(*) AS n FROM tasks WHERE task_id = ?').get(id) as { n: number }).n;
    assert.equal(count(), 1);
    // …and gone once the retention is over, 0 here.
    const pruned = await finished(['tasks', 'resume'], {
      TASKLINE_STATE: state,
      TASKLINE_STATE_RETENTION_S: '0',
    });
    assert.equal(pruned.code, EXIT.ok, pruned.stderr);
    assert.equal(count(), 0);
    db.close();
  });

  test('Ctrl-C during run detaches (130): the task runs on and tasks resume follows it', async () => {
    const state = join(ctx.dir, 'sigint.db');
    const run = cli(longArgs, { TASKLINE_STATE: state });
    await until('some streamed text', () => (run.stdout.length > 5 ? true : undefined));
    run.child.kill('SIGINT');
    assert.equal(await run.done, EXIT.interrupted, run.stderr);
    assert.match(run.stderr, /interrupted; a task already created keeps running/);
    const id = /task (task_\S+)/.exec(run.stderr)![1]!;
    const got = JSON.parse((await finished(['--json', 'tasks', 'get', id])).stdout) as { status: string };
    assert.ok(['running', 'succeeded'].includes(got.status), got.status);
    const resumed = await finished(['tasks', 'resume'], { TASKLINE_STATE: state });
    assert.equal(resumed.code, EXIT.ok, resumed.stderr);
    assert.match(resumed.stderr, new RegExp(`resuming ${id}`));
  });

  test('keys create/list/revoke go through @taskline/auth; the created key works until revoked', async () => {
    const created = await finished(['--json', 'keys', 'create', '--tenant', 'tenant-k', '--name', 'ci']);
    assert.equal(created.code, EXIT.ok, created.stderr);
    const key = JSON.parse(created.stdout) as { id: string; key: string; tenant: string };
    assert.equal(key.tenant, 'tenant-k');
    const list = await finished(['--json', 'keys', 'list', '--tenant', 'tenant-k']);
    assert.deepEqual(
      (JSON.parse(list.stdout) as { id: string }[]).map((k) => k.id),
      [key.id],
    );
    const run = await finished(['--api-key', key.key, 'run', '--max-output-tokens', '2', 'Hi.']);
    assert.equal(run.code, EXIT.ok, run.stderr);
    assert.equal((await finished(['keys', 'revoke', key.id])).code, EXIT.ok);
    const refused = await finished(['--api-key', key.key, 'run', 'Hi.']);
    assert.equal(refused.code, EXIT.auth);
    assert.equal((await finished(['keys', 'revoke', key.id])).code, EXIT.notFound);
  });

  test('every error is one clear line and an exit code that says what happened', async () => {
    const cases: [string[], Record<string, string>, number, RegExp][] = [
      [['tasks', 'get', 'task_doesnotexist'], {}, EXIT.notFound, /task_not_found/],
      [['tasks', 'get', 'task_x'], { TASKLINE_API_KEY: 'wrong-key' }, EXIT.auth, /unauthorized/],
      // Tried once (--retries 0): the message is the same after the default five retries' 8 s.
      [
        ['--retries', '0', 'tasks', 'get', 'task_x'],
        { TASKLINE_URL: 'http://127.0.0.1:1' },
        EXIT.unavailable,
        /Cannot reach/,
      ],
      [['run', '--model', 'nope', 'Hi.'], {}, EXIT.refused, /model_not_found/],
      [['run', '--bogus'], {}, EXIT.usage, /bogus/],
      [['tasks', 'frobnicate', 'x'], {}, EXIT.usage, /usage/],
      [['run', '--max-output-tokens', '0', 'x'], {}, EXIT.usage, /positive integer/],
      [['tasks', 'get', 'x'], { TASKLINE_CONFIG: join(ctx.dir, 'missing.json') }, EXIT.usage, /config file/],
      [['keys', 'list'], { REDIS_URL: 'redis://127.0.0.1:1' }, EXIT.unavailable, /Redis/],
    ];
    for (const [args, env, code, message] of cases) {
      const r = await finished(args, env);
      assert.equal(r.code, code, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, message);
      assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
    }
  });

  test('config file values apply, environment overrides them, flags override both', async () => {
    // Three different URLs: the file's and the environment's reach nothing (each named in the
    // error), the flag's is the ctx.stack.
    const file = join(ctx.dir, 'config.json');
    writeFileSync(file, JSON.stringify({ url: 'http://127.0.0.1:1', apiKey: KEY_A }));
    // Unreachable URLs are tried once (TASKLINE_RETRIES): the error names the URL all the same.
    const fromFile = await finished(['tasks', 'get', 'task_x'], {
      TASKLINE_CONFIG: file,
      TASKLINE_URL: '',
      TASKLINE_RETRIES: '0',
    });
    assert.equal(fromFile.code, EXIT.unavailable, 'the file URL was used');
    assert.match(fromFile.stderr, /127\.0\.0\.1:1\b/);
    const fromEnv = await finished(['tasks', 'get', 'task_x'], {
      TASKLINE_CONFIG: file,
      TASKLINE_URL: 'http://127.0.0.1:2',
      TASKLINE_RETRIES: '0',
    });
    assert.equal(fromEnv.code, EXIT.unavailable);
    assert.match(fromEnv.stderr, /127\.0\.0\.1:2\b/, 'the environment overrides the file');
    const envReaches = await finished(['tasks', 'get', 'task_x'], { TASKLINE_CONFIG: file });
    assert.equal(envReaches.code, EXIT.notFound, 'the environment URL (the stack) overrides the file');
    const flagged = await finished(['--url', ctx.stack.base, 'tasks', 'get', 'task_x'], {
      TASKLINE_CONFIG: file,
      TASKLINE_URL: 'http://127.0.0.1:2',
    });
    assert.equal(flagged.code, EXIT.notFound, 'the flag URL overrides the environment and the file');
  });

  test('a task command loads neither the tool worker nor a Redis client (a second of CPU each start)', async () => {
    const loaded = join(ctx.dir, 'loaded.txt');
    writeFileSync(loaded, '');
    const r = await finished(['tasks', 'get', 'task_doesnotexist'], {
      NODE_OPTIONS: `--import ${LOADED_MODULES_PRELOAD}`,
      TASKLINE_LOADED: loaded,
    });
    assert.equal(r.code, EXIT.notFound, r.stderr);
    const urls = readFileSync(loaded, 'utf8').split('\n');
    assert.ok(
      urls.some((u) => u.includes('/packages/client/')),
      'the hook saw the client load',
    );
    const heavy = urls.filter((u) => /\/tool-worker\/|\/(ioredis|bullmq)\//.test(u));
    assert.deepEqual(heavy, []);
  });
});
