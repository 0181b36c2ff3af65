// Original file: proto/control.proto


export interface Welcome {
  'scheduler_id'?: (string);
  'heartbeat_ms'?: (number);
}

export interface Welcome__Output {
  'scheduler_id': (string);
  'heartbeat_ms': (number);
}
