// Original file: proto/control.proto

import type { ModelSlots as _taskline_control_v1_ModelSlots, ModelSlots__Output as _taskline_control_v1_ModelSlots__Output } from '../../../taskline/control/v1/ModelSlots.js';

export interface Register {
  'worker_id'?: (string);
  'models'?: (_taskline_control_v1_ModelSlots)[];
}

export interface Register__Output {
  'worker_id': (string);
  'models': (_taskline_control_v1_ModelSlots__Output)[];
}
