// Original file: proto/control.proto

import type { ModelSlots as _taskline_control_v1_ModelSlots, ModelSlots__Output as _taskline_control_v1_ModelSlots__Output } from '../../../taskline/control/v1/ModelSlots.js';

export interface Register {
  'worker_id'?: (string);
  'models'?: (_taskline_control_v1_ModelSlots)[];
  /**
   * Random per worker process: a reconnect of the same process replaces its registration, while
   * another process under a live worker's id is refused (ALREADY_EXISTS).
   */
  'instance'?: (string);
}

export interface Register__Output {
  'worker_id': (string);
  'models': (_taskline_control_v1_ModelSlots__Output)[];
  /**
   * Random per worker process: a reconnect of the same process replaces its registration, while
   * another process under a live worker's id is refused (ALREADY_EXISTS).
   */
  'instance': (string);
}
