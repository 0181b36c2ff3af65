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

try {
  const model = await loadOnnxModel(dir, options);
  const requests = new Map<number, AbortController>();
  // The steps of one decode step (every request batched in it) cross in one message.
  let steps: [id: number, tokens: number[], text: string][] = [];
  const flush = () => {
    if (!steps.length) return;
    post({ op: 'steps', steps });
    steps = [];
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
            if (!steps.length) queueMicrotask(flush);
            steps.push([id, step.tokens, step.text]);
          },
        })
        .then(
          (result) => {
            flush();
            post({ op: 'done', id, result });
          },
          (error: unknown) => {
            flush();
            post({ op: 'error', id, message: error instanceof Error ? error.message : String(error) });
          },
        )
        .finally(() => requests.delete(id));
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
