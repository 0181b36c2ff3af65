export { Scheduler, type SchedulerOptions } from './scheduler.js';
