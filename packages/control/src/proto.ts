// The control plane's `.proto`, loaded with the options its generated types assume.
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { fileURLToPath } from 'node:url';
import type { ProtoGrpcType } from './generated/control.js';
import type { ControlClient, ControlHandlers } from './generated/taskline/control/v1/Control.js';
import type { ModelSlots__Output } from './generated/taskline/control/v1/ModelSlots.js';

/** Path of the control plane's `.proto`, shipped next to `dist`. */
export const CONTROL_PROTO = fileURLToPath(new URL('../proto/control.proto', import.meta.url));

/**
 * The message types are generated from the .proto (`src/generated/`, `pnpm --filter
 * @taskline/control generate`) with the options `loadSync` gets below: snake_case fields, every
 * field of a received message present, and the oneof's name (`body`) set to its member's.
 */
export type ModelSlots = ModelSlots__Output;
/** The scheduler's end of a worker's `Connect` stream. */
export type ControlStream = Parameters<ControlHandlers['Connect']>[0];
/** The worker's end of its `Connect` stream. */
export type ControlCall = ReturnType<ControlClient['Connect']>;
type ControlClientCtor = ProtoGrpcType['taskline']['control']['v1']['Control'];

let cached: ControlClientCtor | undefined;

/** The `Control` service, loaded once. */
export function controlService(): ControlClientCtor {
  if (!cached) {
    const definition = protoLoader.loadSync(CONTROL_PROTO, { keepCase: true, defaults: true, oneofs: true });
    const pkg = grpc.loadPackageDefinition(definition) as unknown as ProtoGrpcType;
    cached = pkg.taskline.control.v1.Control;
  }
  return cached;
}
