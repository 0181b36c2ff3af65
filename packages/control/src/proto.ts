import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { fileURLToPath } from 'node:url';

/** Path of the control plane's `.proto`, shipped next to `dist`. */
export const CONTROL_PROTO = fileURLToPath(new URL('../proto/control.proto', import.meta.url));

export interface ModelSlots {
  model: string;
  slots: number;
  free: number;
}

export type WorkerMessage =
  | { body: 'register'; register: { worker_id: string; models: ModelSlots[] } }
  | { body: 'heartbeat'; heartbeat: { models: ModelSlots[]; draining: boolean; lease_renewals: number } };

export type SchedulerMessage =
  | { body: 'welcome'; welcome: { scheduler_id: string; heartbeat_ms: number } }
  | { body: 'redirect'; redirect: { leader_addr: string } }
  | { body: 'drain'; drain: { deadline_ms: number } };

export type ControlStream = grpc.ServerDuplexStream<WorkerMessage, SchedulerMessage>;
export type ControlCall = grpc.ClientDuplexStream<WorkerMessage, SchedulerMessage>;

interface ControlClientCtor {
  new (address: string, credentials: grpc.ChannelCredentials): grpc.Client & { Connect(): ControlCall };
  service: grpc.ServiceDefinition;
}

let cached: ControlClientCtor | undefined;

/** The `Control` service, loaded once; snake_case fields and oneof names as in the .proto. */
export function controlService(): ControlClientCtor {
  if (!cached) {
    const definition = protoLoader.loadSync(CONTROL_PROTO, { keepCase: true, defaults: true, oneofs: true });
    const pkg = grpc.loadPackageDefinition(definition) as unknown as {
      taskline: { control: { v1: { Control: ControlClientCtor } } };
    };
    cached = pkg.taskline.control.v1.Control;
  }
  return cached;
}
