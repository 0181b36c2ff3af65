// Original file: proto/control.proto

import type { Welcome as _taskline_control_v1_Welcome, Welcome__Output as _taskline_control_v1_Welcome__Output } from '../../../taskline/control/v1/Welcome.js';
import type { Redirect as _taskline_control_v1_Redirect, Redirect__Output as _taskline_control_v1_Redirect__Output } from '../../../taskline/control/v1/Redirect.js';
import type { Drain as _taskline_control_v1_Drain, Drain__Output as _taskline_control_v1_Drain__Output } from '../../../taskline/control/v1/Drain.js';

export interface SchedulerMessage {
  'welcome'?: (_taskline_control_v1_Welcome | null);
  'redirect'?: (_taskline_control_v1_Redirect | null);
  'drain'?: (_taskline_control_v1_Drain | null);
  'body'?: "welcome"|"redirect"|"drain";
}

export interface SchedulerMessage__Output {
  'welcome'?: (_taskline_control_v1_Welcome__Output | null);
  'redirect'?: (_taskline_control_v1_Redirect__Output | null);
  'drain'?: (_taskline_control_v1_Drain__Output | null);
  'body'?: "welcome"|"redirect"|"drain";
}
