// Original file: proto/control.proto


export interface Drain {
  /**
   * Milliseconds the worker has to finish its running tasks before handing them back.
   */
  'deadline_ms'?: (number);
}

export interface Drain__Output {
  /**
   * Milliseconds the worker has to finish its running tasks before handing them back.
   */
  'deadline_ms': (number);
}
