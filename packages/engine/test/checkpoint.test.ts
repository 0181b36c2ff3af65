/**
 * Tool checkpoints (checkpoint.lua): one slot on the task record, written only by the attempt that
 * runs the task, so an attempt that lost its lease cannot overwrite what its successor stored.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { TasklineError } from '../src/index.js';
import { harness, newTask, type Harness } from './helpers.js';

let h: Harness;
before(async () => (h = await harness()));
after(() => h.close());

const code = (c: string) => (err: unknown) => err instanceof TasklineError && err.code === c;

test('a checkpoint replaces the last; none reads null', async () => {
  const task = await h.store.create(newTask({ kind: 'tool', model: 'tool:x', onRestart: 'resume' }));
  assert.equal(await h.store.lastCheckpoint(task.id), null);
  await h.store.claim(task.id, 'w1', 10_000);
  await h.store.start(task.id, 1);
  await h.store.checkpoint(task.id, 1, '{"done":1}');
  await h.store.checkpoint(task.id, 1, '{"done":2}');
  // Sent again after a lost reply: the same record.
  await h.store.checkpoint(task.id, 1, '{"done":2}');
  assert.equal(await h.store.lastCheckpoint(task.id), '{"done":2}');
});

test('a stale attempt cannot write a checkpoint over its successor, nor one that is not running', async () => {
  const task = await h.store.create(newTask({ kind: 'tool', model: 'tool:x', onRestart: 'resume' }));
  await h.store.claim(task.id, 'w1', 1);
  await assert.rejects(h.store.checkpoint(task.id, 1, '{"done":0}'), code('illegal_transition'));
  await h.store.start(task.id, 1);
  await h.store.checkpoint(task.id, 1, '{"done":1}');
  await new Promise((r) => setTimeout(r, 5));
  assert.equal(await h.store.recover(task.id), 'queued');
  await h.store.claim(task.id, 'w2', 10_000);
  await assert.rejects(h.store.checkpoint(task.id, 1, '{"done":9}'), code('stale_attempt'));
  assert.equal(await h.store.lastCheckpoint(task.id), '{"done":1}');
  await assert.rejects(
    h.store.checkpoint('task_00000000000000000000000000', 1, '{}'),
    code('task_not_found'),
  );
});
