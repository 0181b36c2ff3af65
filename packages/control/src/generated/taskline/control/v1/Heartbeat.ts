// Original file: proto/control.proto

import type { ModelSlots as _taskline_control_v1_ModelSlots, ModelSlots__Output as _taskline_control_v1_ModelSlots__Output } from '../../../taskline/control/v1/ModelSlots.js';

export interface Heartbeat {
  'models'?: (_taskline_control_v1_ModelSlots)[];
  'draining'?: (boolean);
  /**
   * Task leases this worker has renewed since it started (wraps at 2^32): the operator console's count.
   */
  'lease_renewals'?: (number);
}

export interface Heartbeat__Output {
  'models': (_taskline_control_v1_ModelSlots__Output)[];
  'draining': (boolean);
  /**
   * Task leases this worker has renewed since it started (wraps at 2^32): the operator console's count.
   */
  'lease_renewals': (number);
}
