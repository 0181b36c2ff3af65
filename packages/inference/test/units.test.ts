import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { IncrementalDetokenizer } from '../src/detokenizer.js';
import { sampleToken, uniformAt } from '../src/sampling.js';
import { createInstantBackend } from '../src/index.js';
import type { GenerateStep } from '../src/index.js';

describe('uniformAt', () => {
  it('depends only on (seed, index) and stays in [0, 1)', () => {
    const draws = Array.from({ length: 1000 }, (_, i) => uniformAt(42, i));
    assert.deepEqual(
      draws,
      Array.from({ length: 1000 }, (_, i) => uniformAt(42, i)),
    );
    assert.ok(
      draws.every((u) => u >= 0 && u < 1),
      'draws.every((u) => u >= 0 && u < 1)',
    );
    assert.notEqual(uniformAt(42, 0), uniformAt(43, 0));
    assert.notEqual(uniformAt(2 ** 40, 0), uniformAt(2 ** 40 + 2 ** 32, 0), 'high seed bits count');
    const mean = draws.reduce((a, b) => a + b, 0) / draws.length;
    assert.ok(Math.abs(mean - 0.5) < 0.05, `mean ${mean}`);
  });
});

describe('sampleToken', () => {
  const logits = Float32Array.from([1, 3, 2, -5]);

  it('is greedy at temperature 0', () => {
    assert.equal(sampleToken(logits, { temperature: 0, topP: 1, seed: 1 }, 0), 1);
  });

  it('follows the softmax distribution', () => {
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 4000; i++) counts[sampleToken(logits, { temperature: 1, topP: 1, seed: 7 }, i)]! += 1;
    const z = [...logits].reduce((sum, l) => sum + Math.exp(l), 0);
    for (let k = 0; k < 3; k++) {
      const expected = (Math.exp(logits[k]!) / z) * 4000;
      assert.ok(
        Math.abs(counts[k]! - expected) < 0.15 * expected + 20,
        `token ${k}: ${counts[k]} vs ${expected}`,
      );
    }
  });

  it('keeps only the nucleus', () => {
    // p ≈ [0.09, 0.67, 0.24, 0.0002]: top-p 0.7 keeps tokens 1 and 2, top-p 0.5 only token 1.
    const seen = new Set<number>();
    for (let i = 0; i < 500; i++) seen.add(sampleToken(logits, { temperature: 1, topP: 0.7, seed: 3 }, i));
    assert.deepEqual([...seen].sort(), [1, 2]);
    for (let i = 0; i < 100; i++)
      assert.equal(sampleToken(logits, { temperature: 1, topP: 0.5, seed: 3 }, i), 1);
  });
});

describe('IncrementalDetokenizer', () => {
  const bytes = (ids: number[]) => new TextDecoder().decode(Uint8Array.from(ids));

  it('holds back the bytes of a character split over tokens', () => {
    const d = new IncrementalDetokenizer(bytes);
    const deltas = [...new TextEncoder().encode('a€b😊')].map((b) => d.push(b));
    assert.deepEqual(deltas, ['a', '', '', '€', 'b', '', '', '', '😊']);
  });

  it('flushes an incomplete tail as replacement text', () => {
    const d = new IncrementalDetokenizer(bytes);
    assert.equal(d.push(0x61) + d.push(0xe2), 'a');
    assert.equal(d.flush(), '\uFFFD');
    assert.equal(d.flush(), '');
  });

  it('keeps leading spaces that a decoder strips from the first token', () => {
    // SentencePiece-style: "▁" is a space, dropped at the very start of a decoded text.
    const pieces = ['▁Hello', '▁wor', 'ld', '!', '▁ok'];
    const decode = (ids: number[]) =>
      ids
        .map((i) => pieces[i]!)
        .join('')
        .replaceAll('▁', ' ')
        .replace(/^ /, '');
    const d = new IncrementalDetokenizer(decode);
    const text = pieces.map((_, i) => d.push(i)).join('') + d.flush();
    assert.equal(text, 'Hello world! ok');
  });
});

describe('createInstantBackend', () => {
  const messages = [{ role: 'user' as const, content: 'hello there' }];

  it('emits its fixed tokens and stops', async () => {
    const backend = createInstantBackend({ outputTokens: 12 });
    const steps: GenerateStep[] = [];
    const result = await backend.generate({ messages }, { onStep: (s) => void steps.push(s) });
    assert.equal(result.finishReason, 'stop');
    assert.equal(result.outputTokens, 12);
    assert.equal(steps.map((s) => s.text).join(''), result.text);
    assert.equal(result.text, 'lorem ipsum dolor sit amet, consectetur adipiscing elit.lorem ipsum');
    assert.equal(result.inputTokens, backend.countTokens(messages));
    assert.ok(backend.canSnapshot, 'backend.canSnapshot');
  });

  it('resumes, limits and cancels like a real backend', async () => {
    const backend = createInstantBackend({ outputTokens: 12 });
    const full = await backend.generate({ messages });
    const resumed = await backend.generate({ messages, resumeTokens: full.tokens.slice(0, 5) });
    assert.deepEqual(resumed, full);
    const limited = await backend.generate({ messages, maxOutputTokens: 4 });
    assert.equal(limited.finishReason, 'max_output_tokens');
    assert.equal(limited.outputTokens, 4);
    const controller = new AbortController();
    const cancelled = await backend.generate(
      { messages },
      { signal: controller.signal, onStep: (s) => void (s.tokens[0] === 2 && controller.abort()) },
    );
    assert.equal(cancelled.finishReason, 'cancelled');
    assert.equal(cancelled.outputTokens, 3);
  });
});
