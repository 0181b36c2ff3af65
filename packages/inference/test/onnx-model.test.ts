import assert from 'node:assert/strict';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DEFAULT_MODEL_DIR, loadOnnxModel, loadOnnxModelInThread } from '../src/index.js';
import type { ChatMessage, GenerateRequest, GenerateStep, OnnxModel } from '../src/index.js';
import { sessionOptions } from '../src/onnx-session.js';

// Real onnxruntime and the real tiny model in models/tiny-chat, as a worker would use them.
const ask = (content: string): ChatMessage[] => [{ role: 'user', content }];
// Prompts the model never saw: it rambles, which makes long and varied outputs.
const ramble = ask('Explain quantum tunnelling to a medieval blacksmith, please.');

async function collect(model: OnnxModel, req: GenerateRequest, signal?: AbortSignal) {
  const steps: GenerateStep[] = [];
  const result = await model.generate(req, { signal, onStep: (s) => void steps.push(s) });
  return { result, steps, deltas: steps.map((s) => s.text) };
}

// Every behaviour holds for the model in process and for the same model in a thread of its own.
for (const [where, load] of [
  ['in process', loadOnnxModel],
  ['in its own thread', loadOnnxModelInThread],
] as const) {
  describe(`loadOnnxModel on models/tiny-chat, ${where}`, () => {
    let model: OnnxModel;
    before(async () => {
      model = await load(DEFAULT_MODEL_DIR, { intraOpThreads: 1 });
    });
    after(() => model.dispose());

    it('describes the model', () => {
      assert.equal(model.id, 'tiny-chat');
      assert.ok(model.canSnapshot, 'model.canSnapshot');
      assert.deepEqual(
        {
          numLayers: model.info.numLayers,
          numKeyValueHeads: model.info.numKeyValueHeads,
          headDim: model.info.headDim,
          vocabSize: model.info.vocabSize,
          maxContextTokens: model.info.maxContextTokens,
          stopTokenIds: model.info.stopTokenIds,
          executionProviders: model.info.executionProviders,
        },
        {
          numLayers: 4,
          numKeyValueHeads: 1,
          headDim: 32,
          vocabSize: 512,
          maxContextTokens: 256,
          stopTokenIds: [511, 509],
          executionProviders: ['cpu'],
        },
      );
    });

    it('answers through the chat template and ends its turn with <|im_end|>', async () => {
      const messages = ask('What is the capital of France?');
      const { result, deltas, steps } = await collect(model, { messages });
      assert.equal(result.text, 'The capital of France is Paris.');
      // One step per token, in order, however a thread groups steps into messages.
      assert.deepEqual(
        steps.map((s) => s.tokens),
        result.tokens.map((t) => [t]),
      );
      assert.equal(result.finishReason, 'stop');
      assert.equal(result.inputTokens, model.countTokens(messages));
      assert.equal(result.outputTokens, result.tokens.length);
      assert.ok(!result.tokens.includes(511), 'the stop token is not part of the output');
      assert.equal(deltas.join(''), result.text);
      // "<|im_start|>user\n" + question + "<|im_end|>\n<|im_start|>assistant\n"
      assert.equal(model.countTokens(ask('')), 8);
    });

    it('is deterministic when greedy', async () => {
      const a = await model.generate({ messages: ramble, maxOutputTokens: 40 });
      const b = await model.generate({ messages: ramble, maxOutputTokens: 40, temperature: 0 });
      assert.deepEqual(a, b);
    });

    it('stops at maxOutputTokens', async () => {
      const result = await model.generate({ messages: ramble, maxOutputTokens: 7 });
      assert.equal(result.finishReason, 'max_output_tokens');
      assert.equal(result.outputTokens, 7);
    });

    it('stops when the context is full', async () => {
      // Greedy, the model answers this prompt with more than 5 tokens (see the test above).
      const context = model.countTokens(ramble) + 5;
      const small = await load(DEFAULT_MODEL_DIR, { maxContextTokens: context, intraOpThreads: 1 });
      try {
        const result = await small.generate({ messages: ramble });
        assert.equal(result.finishReason, 'max_output_tokens');
        assert.equal(result.inputTokens + result.outputTokens, context);
        await assert.rejects(
          small.generate({ messages: ask('word '.repeat(context)) }),
          new RegExp(`prompt has \\d+ tokens.*context of ${context}`),
        );
      } finally {
        await small.dispose();
      }
    });

    it('reproduces seeded sampling, and a resumed run continues exactly', async () => {
      const req = { messages: ramble, temperature: 1, topP: 0.95, seed: 1234, maxOutputTokens: 60 };
      const full = await collect(model, req);
      assert.deepEqual((await collect(model, req)).result, full.result);
      const other = await model.generate({ ...req, seed: 99 });
      assert.notDeepEqual(other.tokens, full.result.tokens);

      for (const k of [1, 13, 37]) {
        const resumed = await collect(model, { ...req, resumeTokens: full.result.tokens.slice(0, k) });
        assert.deepEqual(resumed.result, full.result, `resumed after ${k} tokens`);
        assert.deepEqual(
          resumed.steps.flatMap((s) => s.tokens),
          full.result.tokens.slice(k),
        );
        assert.equal(full.deltas.slice(0, k).join('') + resumed.deltas.join(''), full.result.text);
      }
    });

    it('samples only the likeliest token under a tiny top_p, at the hottest temperature and any seed', async () => {
      const greedy = await model.generate({ messages: ramble, maxOutputTokens: 20, temperature: 0 });
      for (const seed of [0, 7, Number.MAX_SAFE_INTEGER]) {
        const req = { messages: ramble, maxOutputTokens: 20, temperature: 2, topP: 1e-9, seed };
        assert.deepEqual((await model.generate(req)).tokens, greedy.tokens, `seed ${seed}`);
      }
    });

    it('returns at once when resumeTokens already reach maxOutputTokens', async () => {
      const result = await model.generate({ messages: ramble, resumeTokens: [72, 105], maxOutputTokens: 2 });
      assert.deepEqual(result, {
        text: 'Hi',
        tokens: [72, 105],
        inputTokens: model.countTokens(ramble),
        outputTokens: 2,
        finishReason: 'max_output_tokens',
      });
    });

    it('sends exact deltas that never split a character', async () => {
      for (const messages of [ask('Say something happy.'), ask('Translate "thank you" into Japanese.')]) {
        const { result, deltas } = await collect(model, { messages });
        assert.equal(result.finishReason, 'stop');
        assert.match(result.text, /😊|ありがとう/);
        assert.equal(deltas.join(''), result.text);
        assert.ok(
          deltas.every((d) => !d.includes('\uFFFD')),
          "deltas.every((d) => !d.includes('\\uFFFD'))",
        );
        assert.ok(
          deltas.some((d) => d === ''),
          'some token ended inside a character and was held back',
        );
      }
    });

    it('leaves a character cut by maxOutputTokens to the resumed run', async () => {
      const messages = ask('Translate "thank you" into Japanese.');
      const full = await collect(model, { messages });
      // A step that ended inside a multi-byte character sent an empty delta.
      const k = full.deltas.findIndex((d) => d === '') + 1;
      assert.ok(k > 0, 'k > 0');
      const cut = await collect(model, { messages, maxOutputTokens: k });
      assert.equal(cut.result.finishReason, 'max_output_tokens');
      assert.equal(cut.result.text, full.deltas.slice(0, k).join(''));
      assert.ok(!cut.result.text.includes('\uFFFD'), "!cut.result.text.includes('\\uFFFD')");
      const rest = await collect(model, { messages, resumeTokens: cut.result.tokens });
      assert.equal(cut.result.text + rest.deltas.join(''), full.result.text);
      assert.deepEqual(rest.result, full.result);
    });

    it('cancels within one step and returns the partial text', async () => {
      const controller = new AbortController();
      const steps: GenerateStep[] = [];
      // A greedy run of 71 tokens: the thread, which hears of the abort a few steps late, is far
      // from its natural end when it does (ramble's 17 tokens could end first on a busy host).
      const result = await model.generate(
        { messages: ask('Tell me a long story.'), maxOutputTokens: 100, temperature: 0 },
        {
          signal: controller.signal,
          onStep: (s) => {
            steps.push(s);
            if (steps.length === 5) controller.abort();
          },
        },
      );
      assert.equal(result.finishReason, 'cancelled');
      // In process the abort is seen before the next step; a thread hears of it a few steps later.
      if (load === loadOnnxModel) assert.equal(result.outputTokens, 5);
      else assert.ok(result.outputTokens >= 5 && result.outputTokens < 100, `${result.outputTokens} tokens`);
      assert.equal(steps.map((s) => s.text).join(''), result.text);

      const early = await model.generate({ messages: ramble }, { signal: AbortSignal.abort() });
      assert.equal(early.finishReason, 'cancelled');
      assert.equal(early.outputTokens, 0);
    });

    it('cancels a request waiting for room in the batch without waiting for that room', async () => {
      const single = await load(DEFAULT_MODEL_DIR, { maxBatch: 1, minStepMs: 10, intraOpThreads: 1 });
      try {
        const controller = new AbortController();
        let steps = 0;
        let queued: Promise<{ finishReason: string; outputTokens: number; stepsBefore: number }> | undefined;
        // The first request holds the only row for 60 steps; the second waits behind it and is cancelled.
        const first = await single.generate(
          { messages: ask('Tell me a long story.'), maxOutputTokens: 60, temperature: 0 },
          {
            onStep: () => {
              steps += 1;
              if (steps === 1)
                queued = single
                  .generate({ messages: ramble }, { signal: controller.signal })
                  .then((r) => ({ ...r, stepsBefore: steps }));
              if (steps === 3) controller.abort();
            },
          },
        );
        const cancelled = await queued!;
        assert.equal(cancelled.finishReason, 'cancelled');
        assert.equal(cancelled.outputTokens, 0);
        assert.ok(cancelled.stepsBefore < 60, `the cancel waited for the whole of the first request`);
        assert.equal(first.outputTokens, 60);
      } finally {
        await single.dispose();
      }
    });

    it('decodes concurrent requests together with the same greedy output as alone', async () => {
      const prompts = [
        ask('Hi'),
        ramble,
        ask('Write a long answer about rivers.'),
        [
          { role: 'system' as const, content: 'You are a helpful assistant.' },
          { role: 'user' as const, content: 'Describe a city at night, then list the planets.' },
        ],
        ask('What is two plus two? And why is the sun hot?'),
      ];
      const alone = [];
      for (const messages of prompts) alone.push(await model.generate({ messages, maxOutputTokens: 50 }));

      const together = await Promise.all(
        prompts.map((messages) => model.generate({ messages, maxOutputTokens: 50 })),
      );
      assert.deepEqual(together, alone);

      // Requests joining a running batch one step after another, so their past lengths all differ.
      const [first, ...others] = [prompts[1]!, prompts[0]!, prompts[2]!, prompts[3]!, prompts[4]!];
      const late: Promise<unknown>[] = [];
      const firstResult = await model.generate(
        { messages: first, maxOutputTokens: 50 },
        {
          onStep: () => {
            const next = others[late.length];
            if (next) late.push(model.generate({ messages: next, maxOutputTokens: 50 }));
          },
        },
      );
      const staggered = [firstResult, ...(await Promise.all(late))];
      assert.deepEqual(staggered, [alone[1], alone[0], alone[2], alone[3], alone[4]]);
    });

    it('fails only the request whose onStep throws', async () => {
      const boom = new Error('boom');
      const [failed, fine] = await Promise.allSettled([
        model.generate({ messages: ramble, maxOutputTokens: 20 }, { onStep: () => Promise.reject(boom) }),
        model.generate({ messages: ask('Hello!') }),
      ]);
      assert.deepEqual(failed, { status: 'rejected', reason: boom });
      assert.equal(fine.status === 'fulfilled' && fine.value.text, 'Hello! How can I help you today?');
    });
  });
}

describe('loadOnnxModel errors and options', () => {
  it('names the files a model directory is missing', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tiny-chat-'));
    try {
      await cp(join(DEFAULT_MODEL_DIR, 'config.json'), join(dir, 'config.json'));
      for (const load of [loadOnnxModel, loadOnnxModelInThread]) {
        await assert.rejects(
          load(dir),
          (error: Error) =>
            error.message.includes(dir) &&
            error.message.includes('tokenizer.json, tokenizer_config.json, model.onnx or onnx/model.onnx'),
        );
      }
    } finally {
      await rm(dir, { recursive: true });
    }
  });

  it('passes execution providers through to onnxruntime', async () => {
    assert.deepEqual(sessionOptions({}).executionProviders, ['cpu']);
    assert.deepEqual(sessionOptions({ executionProviders: ['cuda', 'cpu'] }).executionProviders, [
      'cuda',
      'cpu',
    ]);
    assert.equal(sessionOptions({ intraOpThreads: 2 }).intraOpNumThreads, 2);
    // This machine has the CPU build, which refuses CUDA; the GPU image's CUDA build loads it.
    const loaded = await loadOnnxModel(DEFAULT_MODEL_DIR, { executionProviders: ['cuda'] }).then(
      (m) => m,
      (error: Error) => error,
    );
    if (loaded instanceof Error) assert.match(loaded.message, /providers \[cuda\].*cuda/is);
    else {
      assert.deepEqual(loaded.info.executionProviders, ['cuda']);
      await loaded.dispose();
    }
  });

  for (const load of [loadOnnxModel, loadOnnxModelInThread])
    it(`cancels in-flight requests on dispose and refuses new ones (${load.name})`, async () => {
      const model = await load(DEFAULT_MODEL_DIR, { intraOpThreads: 1 });
      let disposed: Promise<void> | undefined;
      // A greedy run of 71 tokens: the thread, which hears of the abort a few steps late, is far
      // from its natural end when it does (ramble's 17 tokens could end first on a busy host).
      const result = await model.generate(
        { messages: ask('Tell me a long story.'), maxOutputTokens: 100, temperature: 0 },
        { onStep: () => void (disposed ??= model.dispose()) },
      );
      await disposed;
      assert.equal(result.finishReason, 'cancelled');
      await assert.rejects(model.generate({ messages: ramble }), /disposed/);
    });
});
