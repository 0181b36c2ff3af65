/**
 * A model in a thread of its own. onnxruntime-node runs a session synchronously on the thread that
 * calls it, so a model on a service's main thread stops the event loop for every decode step:
 * lease renewals, cancels, Redis replies and the next task's claim wait for the model, and the
 * model waits for them. In its own thread the model decodes while the main thread does the I/O.
 */
import { Worker } from 'node:worker_threads';
import type { ChatTokenizer } from './chat.js';
import {
  DEFAULT_MODEL_DIR,
  loadChatTokenizer,
  type OnnxModel,
  type OnnxModelInfo,
  type OnnxModelOptions,
} from './onnx-model.js';
import type { ChatMessage, GenerateOptions, GenerateRequest, GenerateResult, GenerateStep } from './types.js';
import { ModelThreadDiedError, REQUEST_ERRORS } from './errors.js';

/** Messages to the model thread. */
export type ToThread =
  | { op: 'generate'; id: number; request: GenerateRequest; aborted: boolean }
  | { op: 'cancel'; id: number }
  | { op: 'dispose' };

/** Messages from the model thread. */
export type FromThread =
  | { op: 'ready'; id: string; info: OnnxModelInfo }
  | { op: 'failed'; message: string }
  | { op: 'steps'; steps: [id: number, tokens: number[], text: string][] }
  | { op: 'done'; id: number; result: GenerateResult; largestLogits: number }
  | { op: 'error'; id: number; message: string; name: string; largestLogits: number }
  | { op: 'disposed' };

interface Pending {
  onStep: GenerateOptions['onStep'];
  /** While a promise onStep returned is pending, later steps (and the end) wait behind it. */
  tail?: Promise<void>;
  /** What onStep threw: the generation fails with it. */
  failure?: { error: unknown };
  resolve(result: GenerateResult): void;
  reject(error: unknown): void;
  detach(): void;
}

/**
 * The thread's entry, compiled next to this file. Run from source (the package's tests, under tsx,
 * whose loader threads do not inherit) it is the build's: `pnpm test` builds first.
 */
const ENTRY = new URL(
  import.meta.url.endsWith('.ts') ? '../dist/model-thread-main.js' : './model-thread-main.js',
  import.meta.url,
);

/**
 * loadOnnxModel in a worker thread, behind the same interface. Steps reach `onStep` in order, but
 * the model does not wait for the callback (it runs ahead, and a cancel lands within a few
 * steps); a callback that throws fails its generation, as in process.
 */
export async function loadOnnxModelInThread(
  dir: string = DEFAULT_MODEL_DIR,
  opts: OnnxModelOptions = {},
): Promise<OnnxModel> {
  const thread = new Worker(ENTRY, { workerData: { dir, options: opts } });
  // Until the model owns the thread, its death fails the load: before `ready`, and after it while
  // the tokenizer loads here (an 'error' nobody listens to would be thrown as uncaught).
  let death: Error | undefined;
  let onDeath: ((error: Error) => void) | undefined;
  const die = (error: Error) => {
    death ??= error;
    onDeath?.(error);
  };
  const onExit = (code: number) => die(new Error(`model thread exited with ${code}`));
  thread.on('error', die).on('exit', onExit);
  try {
    const ready = await new Promise<{ id: string; info: OnnxModelInfo }>((resolve, reject) => {
      const onMessage = (message: FromThread) => {
        if (message.op === 'ready') settle(() => resolve(message));
        else if (message.op === 'failed') settle(() => reject(new Error(message.message)));
      };
      const settle = (then: () => void) => {
        thread.off('message', onMessage);
        onDeath = undefined;
        then();
      };
      onDeath = (error) => settle(() => reject(error));
      thread.on('message', onMessage);
    });
    // countTokens is synchronous: the tokenizer is loaded here too (the thread checked the files).
    const { tokenizer } = await loadChatTokenizer(dir);
    if (death) throw death;
    thread.off('error', die).off('exit', onExit);
    return new ThreadedModel(ready.id, ready.info, thread, tokenizer);
  } catch (error) {
    // Read before the terminate, whose own exit is no cause.
    const cause = death ?? error;
    await thread.terminate();
    throw cause;
  }
}

class ThreadedModel implements OnnxModel {
  readonly canSnapshot = true;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private closed = false;
  private failure: Error | null = null;
  private disposed: Promise<void> | undefined;
  private largest = 0;

  constructor(
    readonly id: string,
    readonly info: OnnxModelInfo,
    private readonly thread: Worker,
    private readonly tokenizer: ChatTokenizer,
  ) {
    thread.on('message', (message: FromThread) => this.onMessage(message));
    thread.on('error', (error) =>
      this.fail(new ModelThreadDiedError(`model thread of ${id} died: ${error.message}`, { cause: error })),
    );
    thread.on('exit', (code) =>
      this.fail(new ModelThreadDiedError(`model thread of ${id} exited with ${code}`)),
    );
    // An idle model does not keep the process alive, as one in process would not.
    thread.unref();
  }

  get largestLogits(): number {
    return this.largest;
  }

  get broken(): boolean {
    return this.failure !== null;
  }

  countTokens(messages: ChatMessage[]): number {
    return this.tokenizer.encodeChat(messages).length;
  }

  generate(request: GenerateRequest, opts: GenerateOptions = {}): Promise<GenerateResult> {
    if (this.closed) return Promise.reject(new Error(`model ${this.id} is disposed`));
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    const { signal, onStep } = opts;
    return new Promise<GenerateResult>((resolve, reject) => {
      const cancel = () => this.send({ op: 'cancel', id });
      signal?.addEventListener('abort', cancel, { once: true });
      if (this.pending.size === 0) this.thread.ref();
      this.pending.set(id, {
        onStep,
        resolve,
        reject,
        detach: () => signal?.removeEventListener('abort', cancel),
      });
      this.send({ op: 'generate', id, request, aborted: signal?.aborted ?? false });
    });
  }

  dispose(): Promise<void> {
    this.closed = true;
    this.disposed ??= this.failure
      ? Promise.resolve()
      : new Promise<void>((resolve) => {
          this.thread.once('exit', () => resolve());
          this.thread.ref();
          this.send({ op: 'dispose' });
        });
    return this.disposed;
  }

  private send(message: ToThread): void {
    if (!this.failure) this.thread.postMessage(message);
  }

  private onMessage(message: FromThread): void {
    if (message.op === 'steps') {
      for (const [id, tokens, text] of message.steps) {
        const p = this.pending.get(id);
        if (p) this.step(id, p, { tokens, text });
      }
      return;
    }
    if (message.op !== 'done' && message.op !== 'error') return;
    this.largest = message.largestLogits;
    const p = this.pending.get(message.id);
    if (!p) return;
    this.settle(message.id, p);
    const end = () => {
      if (p.failure) p.reject(p.failure.error);
      else if (message.op === 'done') p.resolve(message.result);
      else p.reject(new (REQUEST_ERRORS.get(message.name) ?? Error)(message.message));
    };
    if (p.tail) void p.tail.then(end);
    else end();
  }

  /**
   * Hands one step to onStep, in order: at once (the usual, synchronous callback: nothing is
   * allocated per token), or behind a promise a previous call returned.
   */
  private step(id: number, p: Pending, step: GenerateStep): void {
    if (!p.onStep || p.failure) return;
    if (p.tail) {
      p.tail = this.behind(
        id,
        p,
        p.tail.then(() => (p.failure ? undefined : p.onStep!(step))),
      );
      return;
    }
    let out: void | Promise<void>;
    try {
      out = p.onStep(step);
    } catch (error) {
      this.stepFailed(id, p, error);
      return;
    }
    if (out) p.tail = this.behind(id, p, out);
  }

  /** Later steps and the end wait for `out`; the tail clears itself once nothing is pending. */
  private behind(id: number, p: Pending, out: Promise<void>): Promise<void> {
    const tail: Promise<void> = Promise.resolve(out)
      .then(undefined, (error: unknown) => this.stepFailed(id, p, error))
      .then(() => {
        if (p.tail === tail) p.tail = undefined;
      });
    return tail;
  }

  /** onStep threw: the generation fails with that error, and the thread stops it. */
  private stepFailed(id: number, p: Pending, error: unknown): void {
    if (p.failure) return;
    p.failure = { error };
    this.send({ op: 'cancel', id });
  }

  private settle(id: number, p: Pending): void {
    this.pending.delete(id);
    p.detach();
    if (this.pending.size === 0 && !this.disposed) this.thread.unref();
  }

  /** The thread died: every request in flight fails, and so does every later one. */
  private fail(error: Error): void {
    if (this.failure) return;
    this.failure = this.closed ? new Error(`model ${this.id} is disposed`) : error;
    for (const [id, p] of this.pending) {
      this.settle(id, p);
      p.reject(error);
    }
  }
}
