// The face of @taskline/control: the gRPC control plane, the BullMQ queue names and the hand-off to them.
export { CONTROL_PROTO, controlService, type ModelSlots } from './proto.js';
export {
  startControlServer,
  type ControlServer,
  type ControlServerOptions,
  type LeaderLookup,
  type WorkerState,
} from './server.js';
export { connectControl, type ControlClient, type ControlClientOptions } from './client.js';
export { TOOLS_MODEL, modelQueueName, queuePrefix, dispatchJobId, type DispatchJob } from './queues.js';
export { JobQueues, type Dispatched, type HandOffTraces } from './handoff.js';
export { normaliseControlAddress } from './address.js';
export {
  controlSecurityFromEnv,
  ControlConfigError,
  type ControlSecurity,
  type ControlSecurityEnv,
} from './security.js';
