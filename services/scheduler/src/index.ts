// The face of the scheduler service.
export { Scheduler, type SchedulerOptions } from './scheduler.js';
