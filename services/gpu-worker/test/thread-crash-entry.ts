/**
 * The gpu-worker as deployed, with one test hook: on SIGUSR2 an exception is thrown inside each of
 * its model threads (their message handler is handed a message it cannot read), as a bug there
 * would throw one. Nothing else changes: the real model runs in its real thread.
 */
import { syncBuiltinESMExports } from 'node:module';
import workerThreads from 'node:worker_threads';
import { exitOnStartFailure } from '@taskline/log';

const modelThreads = new Set<workerThreads.Worker>();
const { Worker } = workerThreads;
// The model thread module imports Worker by name: syncBuiltinESMExports updates that binding.
workerThreads.Worker = class extends Worker {
  constructor(...args: ConstructorParameters<typeof Worker>) {
    super(...args);
    if (!String(args[0]).includes('model-thread-main')) return;
    modelThreads.add(this);
    this.once('exit', () => modelThreads.delete(this));
  }
};
syncBuiltinESMExports();
process.on('SIGUSR2', () => {
  for (const thread of modelThreads) thread.postMessage(null);
});

const { startWorker } = await import('../src/start.js');
exitOnStartFailure('gpu-worker', () => startWorker());
