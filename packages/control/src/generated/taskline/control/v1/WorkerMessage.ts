// Original file: proto/control.proto

import type { Register as _taskline_control_v1_Register, Register__Output as _taskline_control_v1_Register__Output } from '../../../taskline/control/v1/Register.js';
import type { Heartbeat as _taskline_control_v1_Heartbeat, Heartbeat__Output as _taskline_control_v1_Heartbeat__Output } from '../../../taskline/control/v1/Heartbeat.js';

export interface WorkerMessage {
  'register'?: (_taskline_control_v1_Register | null);
  'heartbeat'?: (_taskline_control_v1_Heartbeat | null);
  'body'?: "register"|"heartbeat";
}

export interface WorkerMessage__Output {
  'register'?: (_taskline_control_v1_Register__Output | null);
  'heartbeat'?: (_taskline_control_v1_Heartbeat__Output | null);
  'body'?: "register"|"heartbeat";
}
