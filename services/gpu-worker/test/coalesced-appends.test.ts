// Coalesced appends: many fast tokens from several generations make at most one append per generation per flush tick, sent together.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { EventInput, Finish, RunContext, TaskRecord, TaskStore } from '@taskline/engine';
import type { GenerateOptions, GenerateRequest, ModelBackend } from '@taskline/inference';
import { createResponseRunner, FlushClock } from '../src/response.js';

const TICK_MS = 50;
const TOKENS = 300;

interface Sent {
  task: string;
  /** The event-loop turn it was sent in: appends of one turn leave in one round trip. */
  turn: number;
  events: EventInput[];
  tokens: number[];
}

/** A store that records appends and answers each after `latencyMs` (longer than a tick: a busy Redis). */
function recordingStore(sent: Sent[], latencyMs: (task: string) => number): TaskStore {
  let turn = 0;
  let open = false;
  const append = async (task: string, _attempt: number, tokens: readonly number[], events: EventInput[]) => {
    if (!open) {
      turn++;
      open = true;
      setImmediate(() => (open = false));
    }
    sent.push({ task, turn, events, tokens: [...tokens] });
    await sleep(latencyMs(task));
    return sent.length;
  };
  return { append } as unknown as TaskStore;
}

/** A backend that makes one token about every millisecond, far faster than the tick. */
const fastBackend: ModelBackend = {
  id: 'fast',
  canSnapshot: false,
  async generate(_req: GenerateRequest, opts: GenerateOptions = {}) {
    const tokens: number[] = [];
    for (let i = 0; i < TOKENS; i++) {
      await sleep(1);
      tokens.push(i);
      await opts.onStep?.({ tokens: [i], text: `t${i} ` });
    }
    const text = tokens.map((i) => `t${i} `).join('');
    return { text, tokens, inputTokens: 1, outputTokens: TOKENS, finishReason: 'max_output_tokens' };
  },
  countTokens: () => 1,
  dispose: async () => undefined,
};

function context(id: string, store: TaskStore): RunContext {
  const task = {
    id,
    request: { model: 'fast', input: 'hi' },
    model: 'fast',
    createdAt: 0,
  } as unknown as TaskRecord;
  return { task, attempt: 1, store, signal: new AbortController().signal };
}

const deltas = (events: EventInput[]) =>
  events
    .filter((e) => e.type === 'response.output_text.delta')
    .map((e) => (e.data as { delta: string }).delta)
    .join('');

test('many fast tokens of eight generations: at most one append per generation per tick, all of a tick sent together', async () => {
  const sent: Sent[] = [];
  // Answers slower than a tick, each generation's at its own pace: appends come back at different times.
  const store = recordingStore(sent, (task) => TICK_MS + 5 + 7 * Number(task.slice(1)));
  const runner = createResponseRunner(fastBackend, { clock: new FlushClock(TICK_MS) });
  const ids = Array.from({ length: 8 }, (_, i) => `t${i}`);
  const t0 = performance.now();
  const ends = (await Promise.all(ids.map((id) => runner.run(context(id, store))))) as Finish[];
  const elapsed = performance.now() - t0;
  const ticks = Math.ceil(elapsed / TICK_MS) + 1;

  const expected = Array.from({ length: TOKENS }, (_, i) => `t${i} `).join('');
  for (const [i, id] of ids.entries()) {
    const mine = sent.filter((s) => s.task === id);
    assert.ok(mine.length <= ticks, `${id}: ${mine.length} appends in ${ticks} ticks`);
    assert.ok(mine.length < TOKENS / 10, `${id}: tokens are coalesced (${mine.length} appends)`);
    // Nothing lost or reordered: the appended deltas and the end's held-back ones make the text.
    const text = mine.map((s) => deltas(s.events)).join('') + deltas(ends[i]!.events ?? []);
    assert.equal(text, expected);
    assert.deepEqual(
      mine.flatMap((s) => s.tokens),
      Array.from({ length: mine.flatMap((s) => s.tokens).length }, (_, k) => k),
    );
    // The first append carries the announcements and the first delta at once.
    assert.deepEqual(
      mine[0]!.events.map((e) => e.type),
      ['response.output_item.added', 'response.content_part.added', 'response.output_text.delta'],
    );
  }
  // After each generation's first append (sent at once), appends leave only on the shared ticks:
  // one round trip per tick for all of them, not one per generation.
  const later = sent.filter((s, k) => sent.findIndex((o) => o.task === s.task) !== k);
  const turns = new Set(later.map((s) => s.turn)).size;
  assert.ok(turns <= ticks, `${turns} round trips for ${later.length} appends in ${ticks} ticks`);
  assert.ok(later.length >= 2 * turns, `appends share their round trips (${later.length} in ${turns})`);
});
