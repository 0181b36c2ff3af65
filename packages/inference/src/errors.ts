// The inference errors that keep their name across a model thread.
/**
 * A request the model cannot run as sent (its messages): the caller's to fix, not the backend's
 * fault. Kept by name when it crosses from a model thread.
 */
export class InvalidRequestError extends Error {
  override readonly name: string = 'InvalidRequestError';
}

/** A request whose prompt does not fit the model's context. */
export class InputTooLongError extends InvalidRequestError {
  override readonly name = 'InputTooLongError';
}

/**
 * The model's thread died (an exception in it, or it exited) under a request: the backend failed,
 * not the request, so a worker treats the attempt as one whose worker was lost.
 */
export class ModelThreadDiedError extends Error {
  override readonly name = 'ModelThreadDiedError';
}

/** The errors a model thread's messages name, made again on the owning thread. */
export const REQUEST_ERRORS = new Map<string, new (message: string) => InvalidRequestError>([
  ['InvalidRequestError', InvalidRequestError],
  ['InputTooLongError', InputTooLongError],
]);
