import assert from 'node:assert/strict';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { Worker } from 'node:worker_threads';
import {
  createInstantBackend,
  DEFAULT_MODEL_DIR,
  estimateOnnxModelBytes,
  loadOnnxModel,
  loadOnnxModelInThread,
  ModelCache,
  ModelThreadDiedError,
} from '../src/index.js';
import type { ModelBackend } from '../src/index.js';

/** A cache of instant backends of 100 bytes each that records loads and disposals. */
function fakeCache(budgetBytes: number) {
  const events: string[] = [];
  const cache = new ModelCache<ModelBackend>({
    budgetBytes,
    estimateBytes: () => 100,
    load: async (id) => {
      events.push(`load ${id}`);
      const backend = createInstantBackend({ id });
      return { ...backend, dispose: async () => void events.push(`dispose ${id}`) };
    },
  });
  return { cache, events };
}

describe('ModelCache', () => {
  it('shares one load per id and evicts the least recently used idle model', async () => {
    const { cache, events } = fakeCache(250);
    const loading = cache.acquire('a');
    assert.equal(cache.isLoaded('a'), false, 'loading is not loaded');
    const [a1, a2] = await Promise.all([loading, cache.acquire('a')]);
    assert.equal(a1.model, a2.model);
    assert.equal(cache.isLoaded('a'), true);
    const b = await cache.acquire('b');
    await a1.release();
    await a2.release();
    await b.release();
    assert.deepEqual(cache.ids, ['a', 'b']);
    assert.equal(cache.usedBytes, 200);

    // 'a' was released first, so it is the one to go.
    await (await cache.acquire('c')).release();
    assert.deepEqual(cache.ids, ['b', 'c']);
    assert.equal(cache.isLoaded('a'), false, 'evicted');
    assert.deepEqual(events, ['load a', 'load b', 'dispose a', 'load c']);

    // Using 'b' makes 'c' the oldest.
    await (await cache.acquire('b')).release();
    await (await cache.acquire('a')).release();
    assert.deepEqual(cache.ids, ['b', 'a']);
    assert.equal(events.at(-2), 'dispose c');
  });

  it('never evicts a model in use, and catches up when it is released', async () => {
    const { cache, events } = fakeCache(150);
    const a = await cache.acquire('a');
    const b = await cache.acquire('b');
    assert.deepEqual(cache.ids, ['a', 'b'], 'over budget rather than evicting a model in use');
    assert.equal(cache.usedBytes, 200);
    assert.equal(await a.model.generate({ messages: [] }).then((r) => r.finishReason), 'stop');
    await a.release();
    await a.release();
    assert.deepEqual(cache.ids, ['b']);
    assert.deepEqual(events, ['load a', 'load b', 'dispose a']);
    await b.release();
    await cache.clear();
    assert.deepEqual(cache.ids, []);
    assert.equal(events.at(-1), 'dispose b');
  });

  it('does not keep a failed load', async () => {
    let attempts = 0;
    const cache = new ModelCache({
      budgetBytes: 1000,
      estimateBytes: () => 10,
      load: async (id) => {
        if (++attempts === 1) throw new Error('disk on fire');
        return createInstantBackend({ id });
      },
    });
    await assert.rejects(cache.acquire('x'), /disk on fire/);
    assert.deepEqual(cache.ids, []);
    const lease = await cache.acquire('x');
    assert.equal(lease.model.id, 'x');
    await lease.release();
  });

  it('budgets real ONNX models by file size plus KV cache', async () => {
    const modelBytes = (await stat(join(DEFAULT_MODEL_DIR, 'model.onnx'))).size;
    const estimate = await estimateOnnxModelBytes(DEFAULT_MODEL_DIR, { maxBatch: 2 });
    // 4 layers x (key + value) x 1 KV head x 32 x 256 positions x 2 sequences x 4 bytes
    assert.equal(estimate, modelBytes + 4 * 2 * 1 * 32 * 256 * 2 * 4);

    const cache = new ModelCache({
      budgetBytes: estimate * 1.5,
      estimateBytes: () => estimateOnnxModelBytes(DEFAULT_MODEL_DIR, { maxBatch: 2 }),
      load: (id) => loadOnnxModel(DEFAULT_MODEL_DIR, { id, maxBatch: 2, intraOpThreads: 1 }),
    });
    const first = await cache.acquire('first');
    const second = await cache.acquire('second');
    const messages = [{ role: 'user' as const, content: 'Hello!' }];
    const reply = await first.model.generate({ messages });
    assert.equal(
      reply.text,
      'Hello! How can I help you today?',
      'in-use model still works with the budget exceeded',
    );
    await first.release();
    assert.deepEqual(cache.ids, ['second']);
    await assert.rejects(first.model.generate({ messages }), /disposed/);
    assert.equal((await second.model.generate({ messages })).text, reply.text);
    await second.release();
    await cache.clear();
  });

  it('loads a model anew once its thread has died, failing only what ran on it', async () => {
    const cache = new ModelCache({
      budgetBytes: 1e9,
      estimateBytes: () => 1,
      load: (id) => loadOnnxModelInThread(DEFAULT_MODEL_DIR, { id, intraOpThreads: 1 }),
    });
    const lease = await cache.acquire('tiny');
    const dead = lease.model;
    // An exception inside the model thread, as a bug there would throw: its message handler is
    // handed a message it cannot read.
    const thread = (dead as unknown as { thread: Worker }).thread;
    let steps = 0;
    const running = dead.generate(
      { messages: [{ role: 'user', content: 'Tell me a long story.' }], maxOutputTokens: 100 },
      { onStep: () => void (++steps === 2 && thread.postMessage(null)) },
    );
    // Told apart from a failed request: a worker restarts the task under its on_restart policy.
    await assert.rejects(
      running,
      (err: Error) =>
        err instanceof ModelThreadDiedError && /model thread of tiny died: .*reading 'op'/.test(err.message),
    );
    assert.equal(cache.isLoaded('tiny'), false, 'a dead model is not loaded');
    await lease.release();

    const next = await cache.acquire('tiny');
    assert.notEqual(next.model, dead);
    const reply = await next.model.generate({ messages: [{ role: 'user', content: 'Hello!' }] });
    assert.equal(reply.text, 'Hello! How can I help you today?');
    await next.release();
    await cache.clear();
  });
});
