/**
 * The thread a model runs in (see model-thread.ts): loads it with the options it was given, then
 * runs the requests the owning thread sends and streams their steps back.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { loadOnnxModel, type OnnxModelOptions } from './onnx-model.js';
import type { FromThread, ToThread } from './model-thread.js';

const port = parentPort!;
const { dir, options } = workerData as { dir: string; options: OnnxModelOptions };
const post = (message: FromThread) => port.postMessage(message);
/** Steps held back at most this long (or one decode step, when that is longer). */
const POST_EVERY_MS = 2;

try {
  const model = await loadOnnxModel(dir, options);
  const requests = new Map<number, AbortController>();
  // Steps cross to the owning thread in one message per decode step (every request batched in
  // it), and no more often than every POST_EVERY_MS: each message wakes that thread, which
  // appends on its flush clock anyway. A request's first step goes at once (time to first token),
  // and so does everything held when a request ends.
  let steps: [id: number, tokens: number[], text: string][] = [];
  const started = new Set<number>();
  let urgent = false;
  let lastPost = 0;
  let checking = false;
  const flush = () => {
    if (!steps.length) return;
    post({ op: 'steps', steps });
    steps = [];
    urgent = false;
    lastPost = performance.now();
  };
  const flushIfDue = () => {
    checking = false;
    if (urgent || performance.now() - lastPost >= POST_EVERY_MS) flush();
  };
  port.on('message', (message: ToThread) => {
    if (message.op === 'generate') {
      const { id } = message;
      const controller = new AbortController();
      if (message.aborted) controller.abort();
      requests.set(id, controller);
      model
        .generate(message.request, {
          signal: controller.signal,
          onStep: (step) => {
            // Checked once the decode step is over: every request's row of it is in by then.
            if (!checking) queueMicrotask(flushIfDue);
            checking = true;
            steps.push([id, step.tokens, step.text]);
            if (!started.has(id)) {
              started.add(id);
              urgent = true;
            }
          },
        })
        .then(
          (result) => {
            flush();
            post({ op: 'done', id, result, largestLogits: model.largestLogits });
          },
          (error: unknown) => {
            flush();
            post({
              op: 'error',
              id,
              message: error instanceof Error ? error.message : String(error),
              name: error instanceof Error ? error.name : 'Error',
              largestLogits: model.largestLogits,
            });
          },
        )
        .finally(() => {
          requests.delete(id);
          started.delete(id);
        });
    } else if (message.op === 'cancel') {
      requests.get(message.id)?.abort();
    } else {
      // Finishes what runs (as cancelled), releases the session, then lets the thread end.
      void model.dispose().then(() => {
        post({ op: 'disposed' });
        port.close();
      });
    }
  });
  post({ op: 'ready', id: model.id, info: model.info });
} catch (error) {
  post({ op: 'failed', message: error instanceof Error ? error.message : String(error) });
  port.close();
}
