// Original file: proto/control.proto


export interface Redirect {
  /**
   * Empty when no leader is known right now: the worker tries its next address.
   */
  'leader_addr'?: (string);
}

export interface Redirect__Output {
  /**
   * Empty when no leader is known right now: the worker tries its next address.
   */
  'leader_addr': (string);
}
