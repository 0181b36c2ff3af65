export { Scheduler, type SchedulerOptions } from './scheduler.js';
export { Leadership, LEADER_KEY } from './leader.js';
export {
  defineDispatch,
  pickFair,
  parseWeights,
  dispatchKeys,
  type Pick,
  type FairShareOptions,
} from './dispatch.js';
