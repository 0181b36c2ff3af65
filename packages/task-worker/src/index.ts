// The worker core both worker services run: claim, lease, fence, commit, on_restart, drain, cancel.
export {
  TaskWorker,
  shareSlots,
  jobHold,
  type TaskWorkerOptions,
  type QueueSlots,
  type AttemptRunner,
} from './task-worker.js';
export { whenRedisAnswers } from './redis-retry.js';
export { closeAndExit, exitRefused, workerReadiness, type WorkerResources } from './process.js';
