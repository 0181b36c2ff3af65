import type * as grpc from '@grpc/grpc-js';
import type { MessageTypeDefinition } from '@grpc/proto-loader';

import type { ControlClient as _taskline_control_v1_ControlClient, ControlDefinition as _taskline_control_v1_ControlDefinition } from './taskline/control/v1/Control.js';
import type { Drain as _taskline_control_v1_Drain, Drain__Output as _taskline_control_v1_Drain__Output } from './taskline/control/v1/Drain.js';
import type { Heartbeat as _taskline_control_v1_Heartbeat, Heartbeat__Output as _taskline_control_v1_Heartbeat__Output } from './taskline/control/v1/Heartbeat.js';
import type { ModelSlots as _taskline_control_v1_ModelSlots, ModelSlots__Output as _taskline_control_v1_ModelSlots__Output } from './taskline/control/v1/ModelSlots.js';
import type { Redirect as _taskline_control_v1_Redirect, Redirect__Output as _taskline_control_v1_Redirect__Output } from './taskline/control/v1/Redirect.js';
import type { Register as _taskline_control_v1_Register, Register__Output as _taskline_control_v1_Register__Output } from './taskline/control/v1/Register.js';
import type { SchedulerMessage as _taskline_control_v1_SchedulerMessage, SchedulerMessage__Output as _taskline_control_v1_SchedulerMessage__Output } from './taskline/control/v1/SchedulerMessage.js';
import type { Welcome as _taskline_control_v1_Welcome, Welcome__Output as _taskline_control_v1_Welcome__Output } from './taskline/control/v1/Welcome.js';
import type { WorkerMessage as _taskline_control_v1_WorkerMessage, WorkerMessage__Output as _taskline_control_v1_WorkerMessage__Output } from './taskline/control/v1/WorkerMessage.js';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  taskline: {
    control: {
      v1: {
        Control: SubtypeConstructor<typeof grpc.Client, _taskline_control_v1_ControlClient> & { service: _taskline_control_v1_ControlDefinition }
        Drain: MessageTypeDefinition<_taskline_control_v1_Drain, _taskline_control_v1_Drain__Output>
        Heartbeat: MessageTypeDefinition<_taskline_control_v1_Heartbeat, _taskline_control_v1_Heartbeat__Output>
        ModelSlots: MessageTypeDefinition<_taskline_control_v1_ModelSlots, _taskline_control_v1_ModelSlots__Output>
        Redirect: MessageTypeDefinition<_taskline_control_v1_Redirect, _taskline_control_v1_Redirect__Output>
        Register: MessageTypeDefinition<_taskline_control_v1_Register, _taskline_control_v1_Register__Output>
        SchedulerMessage: MessageTypeDefinition<_taskline_control_v1_SchedulerMessage, _taskline_control_v1_SchedulerMessage__Output>
        Welcome: MessageTypeDefinition<_taskline_control_v1_Welcome, _taskline_control_v1_Welcome__Output>
        WorkerMessage: MessageTypeDefinition<_taskline_control_v1_WorkerMessage, _taskline_control_v1_WorkerMessage__Output>
      }
    }
  }
}

