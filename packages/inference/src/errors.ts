/**
 * A request whose prompt does not fit the model's context: the caller's to fix, not the backend's
 * fault. Kept by name when it crosses from a model thread.
 */
export class InputTooLongError extends Error {
  override readonly name = 'InputTooLongError';
}
