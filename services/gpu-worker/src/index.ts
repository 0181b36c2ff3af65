export { GpuWorker, type GpuWorkerOptions } from './worker.js';
export {
  createResponseRunner,
  toMessages,
  type ResponseRequest,
  type ResponseRunnerOptions,
} from './response.js';
