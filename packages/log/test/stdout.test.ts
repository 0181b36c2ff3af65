/**
 * Stdout when its reader lags: a child process logs into a pipe nobody reads; its event loop must
 * keep turning (timers fire, it answers over IPC) and, once the pipe is read, every line it kept
 * arrives in order, with a `log_lines_dropped` line counting those it could not keep.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { exited, until } from '@taskline/testing';

const DIST = fileURLToPath(new URL('../dist/index.js', import.meta.url));
const LINES = 20_000;
const BUFFER_BYTES = 64 * 1024;

/**
 * Logs LINES events of some 250 bytes, a hundred a turn, then says so; answers `ping` with its
 * timer ticks and dropped count; on `exit` or `throw` logs a last line from an exit handler (after
 * the logger's own) and ends that way.
 */
const CHILD = `
  const { createLogger, droppedLogLines } = await import(${JSON.stringify(DIST)});
  const log = createLogger({ service: 'child' }, 'info', { bufferBytes: ${BUFFER_BYTES} });
  let ticks = 0;
  setInterval(() => ticks++, 5);
  const pad = 'x'.repeat(150);
  for (let seq = 0; seq < ${LINES}; seq++) {
    log.info('event', { seq, pad });
    if (seq % 100 === 99) await new Promise((r) => setImmediate(r));
  }
  process.send({ logged: true });
  process.on('message', (m) => {
    if (m === 'ping') return process.send({ ticks, dropped: droppedLogLines() });
    process.on('exit', () => log.info('bye'));
    process.send({ exiting: true });
    if (m === 'throw') throw new Error('fatal');
    process.exit(0);
  });`;

interface Reply {
  logged?: boolean;
  exiting?: boolean;
  ticks?: number;
  dropped?: number;
}

function spawnChild() {
  const child = spawn(process.execPath, ['--input-type=module', '-e', CHILD], {
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const replies: Reply[] = [];
  child.on('message', (m) => replies.push(m as Reply));
  const next = async (pred: (m: Reply) => boolean): Promise<Reply> => {
    let found: Reply | undefined;
    // Generous: a child whose event loop is stuck never answers at all.
    await until('a reply from the child', () => (found = replies.find(pred)), 30_000);
    replies.splice(replies.indexOf(found!), 1);
    return found!;
  };
  return { child, next, stderr: () => stderr };
}

/** While nobody reads its stdout, the child finishes logging and answers pings, timers turning. */
async function stalled(next: (pred: (m: Reply) => boolean) => Promise<Reply>, child: ChildProcess) {
  await next((m) => m.logged === true);
  child.send('ping');
  const first = await next((m) => m.ticks !== undefined);
  let later = first;
  while (later.ticks! <= first.ticks!) {
    child.send('ping');
    later = await next((m) => m.ticks !== undefined);
  }
  // The pipe took less than the child logged: the backlog filled and lines were dropped.
  assert.ok(later.dropped! > 0, `dropped ${later.dropped}`);
  return later.dropped!;
}

/** Reads the child's stdout from now on; `all` once it has ended. */
function read(child: ChildProcess): { text: () => string; all: () => Promise<string> } {
  let text = '';
  let ended = false;
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (chunk: string) => (text += chunk));
  child.stdout!.on('end', () => (ended = true));
  return {
    text: () => text,
    all: () => until('the end of stdout', () => (ended ? text : undefined), 30_000),
  };
}

/** Kept lines in order, then the count of the rest, then the exit handler's line. */
function assertLines(text: string, dropped: number): void {
  const events = text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as { msg: string; seq?: number; dropped?: number; service: string });
  const seqs = events.filter((e) => e.msg === 'event').map((e) => e.seq!);
  for (let i = 1; i < seqs.length; i++) assert.ok(seqs[i]! > seqs[i - 1]!, `${seqs[i]} after ${seqs[i - 1]}`);
  const notices = events.filter((e) => e.msg === 'log_lines_dropped');
  assert.equal(notices.length, 1, JSON.stringify(notices));
  assert.equal(notices[0]!.dropped, dropped);
  assert.equal(notices[0]!.service, 'child');
  assert.equal(seqs.length + dropped, LINES);
  assert.deepEqual(
    events.slice(-2).map((e) => e.msg),
    ['log_lines_dropped', 'bye'],
  );
}

test('a stdout nobody reads never stalls the event loop; once read, kept lines arrive in order with the dropped count', async () => {
  const { child, next, stderr } = spawnChild();
  try {
    const dropped = await stalled(next, child);
    const out = read(child);
    // The count is written once the pipe drains, while the child runs on.
    await until('the dropped count', () => out.text().includes('"log_lines_dropped"') || undefined, 30_000);
    child.send('exit');
    assert.equal(await exited(child), 0, stderr());
    assertLines(await out.all(), dropped);
  } finally {
    child.kill();
  }
});

for (const end of ['exit', 'throw'] as const)
  test(`what is pending when the process ends (${end}) still goes out once the pipe is read`, async () => {
    const { child, next, stderr } = spawnChild();
    try {
      const dropped = await stalled(next, child);
      child.send(end);
      await next((m) => m.exiting === true);
      // The child now waits at exit for its reader.
      const out = read(child);
      assert.equal(await exited(child), end === 'exit' ? 0 : 1, stderr());
      if (end === 'throw') assert.match(stderr(), /fatal/);
      assertLines(await out.all(), dropped);
    } finally {
      child.kill();
    }
  });
