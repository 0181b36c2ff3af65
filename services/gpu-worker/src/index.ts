export { GpuWorker, type GpuWorkerOptions } from './worker.js';
export { createResponseRunner, toMessages, type ResponseRequest } from './response.js';
