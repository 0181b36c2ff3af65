import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { DEFAULT_MODEL_DIR, loadOnnxModel, loadOnnxModelInThread } from '../src/index.js';
import type { ChatMessage, GenerateRequest, GenerateResult, OnnxModel } from '../src/index.js';

// Chunked prefill on real onnxruntime and the real tiny model in models/tiny-chat.
const ask = (content: string): ChatMessage[] => [{ role: 'user', content }];
// Prompts of different lengths (10 to 47 tokens), one with resumed tokens, so rows prefilled
// together are left-padded by different amounts and cross chunk boundaries at different places.
const REQUESTS: GenerateRequest[] = [
  {
    messages: ask('Explain quantum tunnelling to a medieval blacksmith, please.'),
    maxOutputTokens: 24,
    temperature: 0,
  },
  { messages: ask('Hi'), maxOutputTokens: 24, temperature: 0 },
  {
    messages: [
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: 'Describe a city at night, then list the planets.' },
    ],
    maxOutputTokens: 24,
    temperature: 0,
    resumeTokens: [72, 105],
  },
  { messages: ask('Name a river.'), maxOutputTokens: 24, temperature: 0 },
];
/** Larger than any prompt above: one session.run prefills a whole group. */
const WHOLE = 1000;

async function alone(model: OnnxModel): Promise<GenerateResult[]> {
  const results = [];
  for (const req of REQUESTS) results.push(await model.generate(req));
  return results;
}

for (const [where, load] of [
  ['in process', loadOnnxModel],
  ['in its own thread', loadOnnxModelInThread],
] as const) {
  describe(`chunked prefill on models/tiny-chat, ${where}`, () => {
    let reference: GenerateResult[];
    before(async () => {
      const model = await load(DEFAULT_MODEL_DIR, { prefillChunkTokens: WHOLE, intraOpThreads: 1 });
      try {
        reference = await alone(model);
      } finally {
        await model.dispose();
      }
    });

    // Prefilled together, the rows share a chunk: 13 gives four rows 3 positions a run, 3 gives
    // three rows one each (a group has at most as many rows as the chunk has positions).
    for (const chunk of [1, 3, 13, WHOLE]) {
      it(`generates greedily token for token the same with chunks of ${chunk}, alone and together`, async () => {
        const model = await load(DEFAULT_MODEL_DIR, { prefillChunkTokens: chunk, intraOpThreads: 1 });
        try {
          assert.deepEqual(await alone(model), reference);
          // Arriving together, the requests are prefilled together, left-padded to the longest.
          assert.deepEqual(await Promise.all(REQUESTS.map((req) => model.generate(req))), reference);
        } finally {
          await model.dispose();
        }
      });
    }
  });
}

describe('chunked prefill bounds the logits of one session.run', () => {
  for (const load of [loadOnnxModel, loadOnnxModelInThread]) {
    it(`to the chunk's positions times the vocabulary, however many prompts are prefilled together (${load.name})`, async () => {
      const chunk = 4;
      const model = await load(DEFAULT_MODEL_DIR, { prefillChunkTokens: chunk, intraOpThreads: 1 });
      try {
        const vocab = model.info.vocabSize;
        assert.equal(model.largestLogits, 0, 'no run yet');
        // A prompt of 46 tokens: twelve chunks of at most 4 positions, never the whole prompt at once.
        await model.generate(REQUESTS[0]!);
        assert.equal(model.largestLogits, chunk * vocab);
        // Four prompts together: the rows share the chunk, and a decode step holds one position a row.
        assert.deepEqual(await Promise.all(REQUESTS.map((req) => model.generate(req))), await alone(model));
        assert.equal(model.largestLogits, chunk * vocab);
      } finally {
        await model.dispose();
      }
    });
  }

  it('refuses a chunk of no tokens', async () => {
    for (const prefillChunkTokens of [0, 1.5])
      await assert.rejects(
        loadOnnxModel(DEFAULT_MODEL_DIR, { prefillChunkTokens }),
        /prefillChunkTokens must be an integer of at least 1/,
      );
  });
});
