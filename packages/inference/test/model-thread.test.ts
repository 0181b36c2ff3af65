/**
 * Loading a model in its thread (loadOnnxModelInThread) fails as one load, whatever fails: the
 * thread before it is ready, or, after `ready`, the tokenizer the owning thread loads then, or the
 * thread dying meanwhile. The thread is gone once the load has failed.
 *
 * The real model runs in its real thread. The one hook: every Worker this file makes is watched,
 * and a test acts on a model thread's `ready` before loadOnnxModelInThread reads it.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { syncBuiltinESMExports } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import workerThreads from 'node:worker_threads';

let onReady: ((thread: workerThreads.Worker) => void) | undefined;
const threads: workerThreads.Worker[] = [];
const { Worker } = workerThreads;
// model-thread.ts imports Worker by name: syncBuiltinESMExports updates that binding.
workerThreads.Worker = class extends Worker {
  constructor(...args: ConstructorParameters<typeof Worker>) {
    super(...args);
    threads.push(this);
    // Listening from the constructor on, this runs before loadOnnxModelInThread sees `ready`.
    this.on('message', (message: { op?: string } | null) => {
      if (message?.op === 'ready') onReady?.(this);
    });
  }
};
syncBuiltinESMExports();
const { DEFAULT_MODEL_DIR, loadOnnxModelInThread } = await import('../src/index.js');

const dirs: string[] = [];
after(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

/** A copy of the tiny model's folder. */
function modelCopy(): string {
  const dir = mkdtempSync(join(tmpdir(), 'taskline-model-'));
  dirs.push(dir);
  for (const file of [
    'config.json',
    'generation_config.json',
    'model.onnx',
    'tokenizer.json',
    'tokenizer_config.json',
  ])
    copyFileSync(join(DEFAULT_MODEL_DIR, file), join(dir, file));
  return dir;
}

it('a tokenizer that fails to load after the thread is ready fails the load, and ends the thread', async () => {
  const dir = modelCopy();
  onReady = () => writeFileSync(join(dir, 'tokenizer.json'), '{ "model": ');
  await assert.rejects(loadOnnxModelInThread(dir, { intraOpThreads: 1 }), SyntaxError);
  assert.equal(threads.at(-1)!.threadId, -1, 'the model thread is gone');
});

it('a thread that dies while the tokenizer loads after ready fails the load with its error', async () => {
  const dir = modelCopy();
  // tokenizer.json as a pipe: each read of it waits for a write, so the owning thread's read after
  // `ready` is held open until the model thread has died.
  const tokenizer = join(dir, 'tokenizer.json');
  const content = readFileSync(tokenizer);
  rmSync(tokenizer);
  execFileSync('mkfifo', [tokenizer]);
  void writeFile(tokenizer, content); // the model thread's read
  onReady = (thread) => {
    // An exception inside the model thread, as a bug there would throw: its message handler is
    // handed a message it cannot read.
    thread.postMessage(null);
    thread.once('exit', () => void writeFile(tokenizer, content));
  };
  await assert.rejects(loadOnnxModelInThread(dir, { intraOpThreads: 1 }), /reading 'op'/);
  assert.equal(threads.at(-1)!.threadId, -1, 'the model thread is gone');
});
