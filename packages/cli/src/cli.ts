// The `taskline` commands: parse the arguments, run one command, map what happened to an exit code.
import { readFileSync } from 'node:fs';
import { addAbortSignal, type Readable } from 'node:stream';
import { parseArgs } from 'node:util';
import {
  isTerminalStatus,
  LmspClient,
  responseText,
  TasklineClientError,
  TextAssembler,
  tokenHashId,
  type CreateTaskRequest,
  type StreamEvent,
  type Task,
} from '@taskline/client';
import { DEFAULTS } from '@taskline/config';
import { DEFAULT_RETRIES, resolveConfig, UsageError, type CliConfig } from './config.js';
import { describeError, EXIT, exitForStatus } from './exit.js';
import type { CliIo } from './io.js';
import { DEFAULT_STATE_RETENTION_S, SqliteTaskIdStore } from './sqlite-store.js';

export const USAGE = `usage: taskline [options] <command>

commands:
  run [--model M] [--on-restart fail|retry|resume] [--max-output-tokens N] [--seed N]
      [--temperature T] [--instructions TEXT] [--idempotency-key K] [--poll] <prompt…|->
                               create a task and follow it (live progress on stderr, text on stdout)
  tasks get <task id>          print the task
  tasks cancel <task id> [--wait]
                               request a cancel (exit 8 while the task is still stopping;
                               --wait: 0 once cancelled, 6 if it ended otherwise)
  tasks watch <task id>        follow a task's events to its end
  tasks resume                 follow every unfinished task this CLI created (after a crash)
  keys create --tenant T [--name N] | keys list [--tenant T] | keys revoke <key id>
                               operator commands on the API keys in Redis
  tool-worker --module PATH    serve the tools a built module exports, as durable tasks
                               (the tool-worker service; settings from TASKLINE_* and REDIS_URL)
  tool-worker --upstreams FILE serve the tools of upstream MCP servers (docs/gateway.md)

options:
  --url URL          API origin        (TASKLINE_URL, config "url"; default http://127.0.0.1:8080)
  --api-key KEY      bearer token      (TASKLINE_API_KEY, config "apiKey")
  --state FILE       task id database  (TASKLINE_STATE, config "state"; default ~/.local/state/taskline/tasks.db)
  --state-retention SECONDS
                     how long a finished task stays in it (TASKLINE_STATE_RETENTION_S, config
                     "stateRetention"; default ${DEFAULT_STATE_RETENTION_S}, as the server keeps ended tasks; 0: gone the
                     next run); a prompt stays only until the server has created its task
  --retries N        tries after the first when the server cannot be reached or asks to wait
                     (429, 503) (TASKLINE_RETRIES, config "retries"; default ${DEFAULT_RETRIES}; 0: fail at once)
  --redis-url URL    for keys          (REDIS_URL, config "redisUrl"; required, no default)
  --jwt-tenant-claim C
                     the JWT claim the server reads the tenant from (TASKLINE_JWT_TENANT_CLAIM,
                     config "jwtTenantClaim"; default ${DEFAULTS.TASKLINE_JWT_TENANT_CLAIM}): with the issuer and subject, what
                     keeps a JWT's tasks resumable after the token is renewed
  --config FILE      JSON config file  (TASKLINE_CONFIG; default ~/.config/taskline/config.json)
  --json             machine-readable output on stdout
  --quiet            no progress line
  --version          the CLI's version (with --json: {"version": ...})
  -h, --help

exit codes: 0 ok/succeeded, 1 task failed, 2 usage, 3 task cancelled, 4 not found,
  5 auth refused, 6 request refused, 7 server unreachable, 8 cancel requested (not yet stopped),
  70 internal error, 130 interrupted (the task keeps running; use tasks resume),
  141 stdout closed by its reader (the task keeps running)`;

const OPTIONS = {
  url: { type: 'string' },
  'api-key': { type: 'string' },
  state: { type: 'string' },
  'state-retention': { type: 'string' },
  retries: { type: 'string' },
  'redis-url': { type: 'string' },
  'jwt-tenant-claim': { type: 'string' },
  config: { type: 'string' },
  json: { type: 'boolean', default: false },
  quiet: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
  version: { type: 'boolean', default: false },
  model: { type: 'string' },
  'on-restart': { type: 'string' },
  'max-output-tokens': { type: 'string' },
  instructions: { type: 'string' },
  seed: { type: 'string' },
  temperature: { type: 'string' },
  'idempotency-key': { type: 'string' },
  poll: { type: 'boolean', default: false },
  wait: { type: 'boolean', default: false },
  tenant: { type: 'string' },
  name: { type: 'string' },
} as const;

type Values = ReturnType<typeof parse>['values'];

function parse(argv: string[]) {
  try {
    return parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n\n${USAGE}`);
  }
}

/** The CLI package's version, read where it ships (`dist/` and `src/` sit beside package.json). */
const cliVersion = () =>
  (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string })
    .version;

function printVersion(values: Values, io: CliIo): number {
  io.stdout.write(
    values.json ? `${JSON.stringify({ version: cliVersion() })}\n` : `taskline ${cliVersion()}\n`,
  );
  return EXIT.ok;
}

/** Runs one `taskline` command; resolves with its exit code and never throws. */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  let store: SqliteTaskIdStore | undefined;
  try {
    const { values, positionals } = parse(argv);
    if (values.version) return printVersion(values, io);
    if (values.help || positionals.length === 0) {
      io.stdout.write(USAGE + '\n');
      return positionals.length === 0 && !values.help ? EXIT.usage : EXIT.ok;
    }
    const config = resolveConfig(
      {
        url: values.url,
        apiKey: values['api-key'],
        state: values.state,
        redisUrl: values['redis-url'],
        jwtTenantClaim: values['jwt-tenant-claim'],
        stateRetention: values['state-retention'],
        retries: values.retries,
        config: values.config,
      },
      io.env,
    );
    const [group, sub, ...rest] = positionals;
    // Imported on use: key management needs a Redis client the task commands never load.
    if (group === 'keys') return await (await import('./keys.js')).runKeys(sub, rest, values, config, io);
    store = openStore(config);
    const client = new LmspClient({
      baseUrl: config.url,
      apiKey: config.apiKey,
      jwtTenantClaim: config.jwtTenantClaim,
      maxAttempts: config.retries + 1,
      store,
    });
    // A JWT's entries written when the store keyed them by the token's hash (a no-op otherwise).
    store.rekey(client.endpoint, tokenHashId(config.apiKey), client.scope.credential);
    const ctx: Ctx = { client, store, values, io, config };
    if (group === 'run')
      return await run(
        ctx,
        [sub, ...rest].filter((s): s is string => s !== undefined),
      );
    if (group === 'tasks') {
      const [id, ...extra] = rest;
      if (sub === 'resume' && id === undefined) return await resume(ctx);
      if (id === undefined || extra.length > 0 || !['get', 'cancel', 'watch'].includes(sub ?? ''))
        throw new UsageError(`usage: taskline tasks get|cancel|watch <task id> | taskline tasks resume`);
      // An empty id would name the collection (GET /lmsp/v1/tasks), which answers 405.
      if (id.trim() === '') throw new UsageError('A task id cannot be empty.');
      if (sub === 'get') return await get(ctx, id);
      if (sub === 'cancel') return await cancel(ctx, id);
      return await follow(ctx, id, 0);
    }
    throw new UsageError(`Unknown command "${group}".\n\n${USAGE}`);
  } catch (err) {
    const { code, message } = describeError(err);
    if (code === EXIT.interrupted) {
      io.stderr.write(
        '\ntaskline: interrupted; a task already created keeps running (taskline tasks resume follows it)\n',
      );
    } else io.stderr.write(`taskline: ${message}\n`);
    return code;
  } finally {
    store?.close();
  }
}

/** A task database that cannot be opened is the configuration's fault (a folder, no write access). */
function openStore(config: CliConfig): SqliteTaskIdStore {
  try {
    return new SqliteTaskIdStore(config.state, { retentionS: config.stateRetentionS });
  } catch (err) {
    throw new UsageError(
      `Cannot use ${config.state} as the task database (--state, TASKLINE_STATE): ${(err as Error).message}`,
    );
  }
}

interface Ctx {
  client: LmspClient;
  store: SqliteTaskIdStore;
  values: Values;
  io: CliIo;
  config: CliConfig;
}

/** Reads stdin to its end; Ctrl-C stops the read (the prompt may still be being typed). */
async function readAll(stream: NodeJS.ReadableStream, signal?: AbortSignal): Promise<string> {
  const chunks: Buffer[] = [];
  try {
    const readable = signal ? addAbortSignal(signal, stream as Readable) : stream;
    for await (const chunk of readable) chunks.push(Buffer.from(chunk as Buffer | string));
  } catch (err) {
    if (signal?.aborted) throw new TasklineClientError('aborted', 'Interrupted while reading stdin.');
    throw err;
  }
  // Decoded once: a character's UTF-8 bytes may be split between two reads.
  return Buffer.concat(chunks).toString('utf8');
}

function intFlag(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^[1-9][0-9]*$/.test(value))
    throw new UsageError(`--${name} takes a positive integer, not "${value}".`);
  return Number(value);
}

async function run(ctx: Ctx, words: string[]): Promise<number> {
  const { values, io, client } = ctx;
  const prompt =
    words.length === 1 && words[0] === '-' ? await readAll(io.stdin, io.signal) : words.join(' ');
  if (!prompt.trim()) throw new UsageError('taskline run needs a prompt (or - to read it from stdin).');
  const onRestart = values['on-restart'] ?? 'fail';
  if (!['fail', 'retry', 'resume'].includes(onRestart))
    throw new UsageError(`--on-restart takes fail, retry or resume, not "${onRestart}".`);
  const maxOutputTokens = intFlag(values['max-output-tokens'], 'max-output-tokens');
  const seed = values.seed === '0' ? 0 : intFlag(values.seed, 'seed');
  // Number('') is 0: an empty value (an unset shell variable) would silently mean greedy decoding.
  const temperature = values.temperature === undefined ? undefined : Number(values.temperature.trim() || NaN);
  if (temperature !== undefined && !(temperature >= 0 && temperature <= 2))
    throw new UsageError(`--temperature takes a number from 0 to 2, not "${values.temperature}".`);
  const body: CreateTaskRequest = {
    type: 'response',
    input: {
      model: values.model ?? 'tiny-chat',
      input: prompt,
      ...(values.instructions !== undefined && { instructions: values.instructions }),
      ...(maxOutputTokens !== undefined && { max_output_tokens: maxOutputTokens }),
      ...(seed !== undefined && { seed }),
      ...(temperature !== undefined && { temperature }),
    },
    on_restart: onRestart as CreateTaskRequest['on_restart'],
  };
  const task = await client.createTask(body, {
    idempotencyKey: values['idempotency-key'],
    signal: io.signal,
  });
  if (!values.json) io.stderr.write(`task ${task.id}\n`);
  return follow(ctx, task.id, 0, onRestart);
}

async function get(ctx: Ctx, id: string): Promise<number> {
  const task = await ctx.client.getTask(id, ctx.io.signal);
  if (ctx.values.json) ctx.io.stdout.write(JSON.stringify(task) + '\n');
  else ctx.io.stdout.write(describeTask(task));
  return EXIT.ok;
}

function describeTask(task: Task): string {
  const lines = [
    `${task.id}  ${task.status}  on_restart=${task.on_restart}  updated ${new Date(task.updated_at * 1000).toISOString()}`,
  ];
  if (task.response) lines.push(responseText(task.response));
  if (task.error) lines.push(`error: ${task.error.detail ?? task.error.title} [${task.error.code}]`);
  return lines.join('\n') + '\n';
}

async function cancel(ctx: Ctx, id: string): Promise<number> {
  const { client, values, io } = ctx;
  const outcome = await client.cancelTask(id, io.signal);
  if (values.wait && !isTerminalStatus(outcome.task.status)) {
    if (!values.json) io.stderr.write(`${id}: cancellation requested; waiting for the task to stop\n`);
    const final = await client.wait(id, { signal: io.signal });
    report(ctx, final);
    // The cancel is what this command asked for: confirmed is 0, as for a task already cancelled;
    // a task that ended otherwise (its work won the race) was not cancelled, as for any ended task.
    if (final.status === 'cancelled') return EXIT.ok;
    io.stderr.write(`taskline: ${id} ended ${final.status} before the cancel took effect\n`);
    return EXIT.refused;
  }
  if (values.json) io.stdout.write(JSON.stringify({ state: outcome.state, task: outcome.task }) + '\n');
  else
    io.stdout.write(
      outcome.state === 'cancelled'
        ? `${id}: cancelled\n`
        : `${id}: cancellation requested (the task is ${outcome.task.status}; it is not cancelled until it stops)\n`,
    );
  return outcome.state === 'cancelled' ? EXIT.ok : EXIT.cancelRequested;
}

function report(ctx: Ctx, task: Task): void {
  if (ctx.values.json) ctx.io.stdout.write(JSON.stringify(task) + '\n');
  else if (task.status !== 'succeeded') ctx.io.stderr.write(describeTask(task));
}

/** A progress line on a terminal's stderr, rewritten in place; nothing when stderr is not a TTY. */
function progress(ctx: Ctx) {
  const live = !ctx.values.quiet && !ctx.values.json && ctx.io.stderr.isTTY === true;
  let shown = false;
  return {
    update(id: string, status: string, events: number, chars: number) {
      if (!live) return;
      ctx.io.stderr.write(`\r\x1b[2K${id} ${status} · ${events} events · ${chars} chars`);
      shown = true;
    },
    clear() {
      if (shown) ctx.io.stderr.write('\r\x1b[2K');
      shown = false;
    },
  };
}

/** `--poll`: reads the task until it ends instead of following its events. */
async function pollToEnd(ctx: Ctx, id: string): Promise<number> {
  const { client, values, io } = ctx;
  const p = progress(ctx);
  const final = await client.wait(id, {
    signal: io.signal,
    onUpdate: (t) => p.update(id, t.status, 0, 0),
  });
  p.clear();
  if (!values.json) io.stdout.write(responseText(final.response) + '\n');
  report(ctx, final);
  return exitForStatus(final.status);
}

/**
 * Follows a task: the event stream (text to stdout as it comes, resumed across disconnects), or
 * polling with `--poll`. Exit code from the task's final status. stdout gets exactly the final
 * text, or with `--json` the final task as JSON (the stream says when it ends: no polling). A
 * `retry` task may start over (`response.restarted`), and printed text cannot be taken back, so
 * its text is held until the stream ends (read from its first event, so a resumed follow never
 * misses what an earlier one held back), the progress line counting it.
 */
async function follow(
  ctx: Ctx,
  id: string,
  after: number | undefined,
  policy?: string | null,
): Promise<number> {
  const { client, values, io } = ctx;
  if (values.poll) return pollToEnd(ctx, id);
  const held = (policy ?? (await client.getTask(id, io.signal)).on_restart) === 'retry';
  const p = progress(ctx);
  const text = new TextAssembler();
  let events = 0;
  let status = 'queued';
  let wrote = false;
  const iterator = client.stream(id, {
    signal: io.signal,
    ...(!held && after !== undefined && after > 0 ? { after } : held ? { after: 0 } : {}),
  });
  for await (const event of iterator as AsyncIterable<StreamEvent>) {
    events++;
    status = event.task_status ?? status;
    const delta = text.push(event);
    if (delta !== '' && !held && !values.json) {
      p.clear();
      io.stdout.write(delta);
      wrote = true;
    }
    p.update(id, status, events, text.text.length);
  }
  p.clear();
  if (held && text.text !== '' && !values.json) {
    io.stdout.write(text.text);
    wrote = true;
  }
  if (wrote) io.stdout.write('\n');
  const final = await client.getTask(id, io.signal);
  report(ctx, final);
  return exitForStatus(final.status);
}

/**
 * Entries of an older CLI recorded no credential. One whose task this credential can read is its
 * own (another tenant's task is not found) and is followed from now on; the others stay as they are.
 */
async function claimUnscoped(ctx: Ctx): Promise<void> {
  const { client, store, io } = ctx;
  for (const { key, taskId } of store.unscoped(client.endpoint)) {
    if (taskId === null) {
      io.stderr.write(
        `taskline: ${key}: not resumed: an older taskline recorded neither its task nor its API key\n`,
      );
      continue;
    }
    try {
      await client.getTask(taskId, io.signal);
    } catch (err) {
      if (err instanceof TasklineClientError && err.code === 'task_not_found') continue;
      throw err;
    }
    store.claim(key, client.scope);
  }
}

async function resume(ctx: Ctx): Promise<number> {
  const { client, io, values } = ctx;
  await claimUnscoped(ctx);
  const pending = await client.resume(io.signal);
  if (pending.length === 0) {
    if (!values.json) io.stderr.write('no unfinished tasks\n');
    return EXIT.ok;
  }
  let worst: number = EXIT.ok;
  for (const { entry, task, error } of pending) {
    let code: number;
    if (error) {
      // A create the server refuses for good: the client marked it done; say so and go on.
      const d = describeError(error);
      io.stderr.write(`taskline: ${entry.key}: not created: ${d.message}\n`);
      code = d.code;
    } else {
      if (!values.json)
        io.stderr.write(`resuming ${task.id} (${task.status}) after event ${entry.lastEventId}\n`);
      try {
        code = await follow(ctx, task.id, entry.lastEventId, task.on_restart);
      } catch (err) {
        if (err instanceof TasklineClientError && err.code === 'aborted') throw err;
        const d = describeError(err);
        io.stderr.write(`taskline: ${task.id}: ${d.message}\n`);
        code = d.code;
      }
    }
    // Failed outranks cancelled outranks success; any other error code wins over all three.
    const rank = (c: number) =>
      c === EXIT.ok ? 0 : c === EXIT.taskCancelled ? 1 : c === EXIT.taskFailed ? 2 : 3;
    if (rank(code) > rank(worst)) worst = code;
  }
  return worst;
}
