// Original file: proto/control.proto


export interface ModelSlots {
  'model'?: (string);
  'slots'?: (number);
  'free'?: (number);
}

export interface ModelSlots__Output {
  'model': (string);
  'slots': (number);
  'free': (number);
}
