// The face of the gpu-worker service: the worker and its response runner.
export { GpuWorker, type GpuWorkerOptions } from './worker.js';
export {
  createResponseRunner,
  toMessages,
  type ResponseRequest,
  type ResponseRunnerOptions,
} from './response.js';
