// Requests tests share: generations of known lengths on the bundled tiny model.
/**
 * Seed 22 at temperature 2 makes the tiny model ramble for ~125 tokens before it stops; with
 * TASKLINE_WORKER_MIN_STEP_MS a generation lasts seconds, long enough to cancel, kill or drain.
 */
export const LONG = {
  model: 'tiny-chat',
  input: 'Tell me a long story about the sea.',
  seed: 22,
  temperature: 2,
  max_output_tokens: 200,
};
