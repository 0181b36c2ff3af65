// Original file: proto/control.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { SchedulerMessage as _taskline_control_v1_SchedulerMessage, SchedulerMessage__Output as _taskline_control_v1_SchedulerMessage__Output } from '../../../taskline/control/v1/SchedulerMessage.js';
import type { WorkerMessage as _taskline_control_v1_WorkerMessage, WorkerMessage__Output as _taskline_control_v1_WorkerMessage__Output } from '../../../taskline/control/v1/WorkerMessage.js';

export interface ControlClient extends grpc.Client {
  /**
   * A worker opens one stream to the leader: its first message is a Register, then Heartbeats.
   * A standby answers with one Redirect (the leader's address, if known) and closes the stream.
   * A caller without the control-plane credential is refused UNAUTHENTICATED before either.
   */
  Connect(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_taskline_control_v1_WorkerMessage, _taskline_control_v1_SchedulerMessage__Output>;
  Connect(options?: grpc.CallOptions): grpc.ClientDuplexStream<_taskline_control_v1_WorkerMessage, _taskline_control_v1_SchedulerMessage__Output>;
  /**
   * A worker opens one stream to the leader: its first message is a Register, then Heartbeats.
   * A standby answers with one Redirect (the leader's address, if known) and closes the stream.
   * A caller without the control-plane credential is refused UNAUTHENTICATED before either.
   */
  connect(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_taskline_control_v1_WorkerMessage, _taskline_control_v1_SchedulerMessage__Output>;
  connect(options?: grpc.CallOptions): grpc.ClientDuplexStream<_taskline_control_v1_WorkerMessage, _taskline_control_v1_SchedulerMessage__Output>;
  
}

export interface ControlHandlers extends grpc.UntypedServiceImplementation {
  /**
   * A worker opens one stream to the leader: its first message is a Register, then Heartbeats.
   * A standby answers with one Redirect (the leader's address, if known) and closes the stream.
   * A caller without the control-plane credential is refused UNAUTHENTICATED before either.
   */
  Connect: grpc.handleBidiStreamingCall<_taskline_control_v1_WorkerMessage__Output, _taskline_control_v1_SchedulerMessage>;
  
}

export interface ControlDefinition extends grpc.ServiceDefinition {
  Connect: MethodDefinition<_taskline_control_v1_WorkerMessage, _taskline_control_v1_SchedulerMessage, _taskline_control_v1_WorkerMessage__Output, _taskline_control_v1_SchedulerMessage__Output>
}
