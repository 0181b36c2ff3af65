import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import type { TrackedTask } from '@taskline/client';
import { SqliteTaskIdStore } from '../src/index.js';

const A = { endpoint: 'http://api.example', credential: 'sha256:aaaa' };
const B = { endpoint: 'http://api.example', credential: 'sha256:bbbb' };

const entry = (key: string, scope: typeof A, taskId: string | null): TrackedTask => ({
  key,
  protocol: 'lmsp',
  ...scope,
  taskId,
  request: { input: key },
  status: 'running',
  lastEventId: 3,
  done: false,
  createdAt: 1,
  updatedAt: 1,
});

test('entries are per endpoint and credential: one key under two credentials is two entries', () => {
  const store = new SqliteTaskIdStore(join(mkdtempSync(join(tmpdir(), 'taskline-store-')), 'tasks.db'));
  store.put(entry('k', A, 'task_a'));
  store.put(entry('k', B, 'task_b'));
  assert.equal(store.get('k', A)?.taskId, 'task_a');
  assert.equal(store.get('k', B)?.taskId, 'task_b');
  assert.equal(store.get('k', { ...A, endpoint: 'http://other.example' }), null);
  assert.deepEqual(
    store.unfinished(B).map((e) => e.taskId),
    ['task_b'],
  );
  store.close();
});

test("a file of an older CLI keeps its entries, unscoped until a credential's task proves them its own", () => {
  const path = join(mkdtempSync(join(tmpdir(), 'taskline-store-')), 'tasks.db');
  const old = new Database(path);
  old.exec(`CREATE TABLE tasks (key TEXT PRIMARY KEY, protocol TEXT NOT NULL, endpoint TEXT NOT NULL,
    task_id TEXT, request TEXT NOT NULL, status TEXT NOT NULL, last_event_id INTEGER NOT NULL,
    done INTEGER NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL)`);
  const insert = old.prepare('INSERT INTO tasks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)');
  insert.run('old-1', 'lmsp', A.endpoint, 'task_old', '{}', 'running', 7, 0, 1, 1);
  insert.run('old-2', 'lmsp', A.endpoint, null, '{}', 'creating', 0, 0, 2, 2);
  old.close();

  const store = new SqliteTaskIdStore(path);
  assert.deepEqual(store.unfinished(A), [], 'no credential follows an entry that recorded none');
  assert.deepEqual(store.unscoped(A.endpoint), [
    { key: 'old-1', taskId: 'task_old' },
    { key: 'old-2', taskId: null },
  ]);
  store.claim('old-1', A);
  assert.deepEqual(
    store.unfinished(A).map((e) => [e.key, e.taskId, e.lastEventId]),
    [['old-1', 'task_old', 7]],
  );
  assert.deepEqual(store.unscoped(A.endpoint), [{ key: 'old-2', taskId: null }]);
  store.close();
  // Opened again: already migrated, nothing changes.
  const again = new SqliteTaskIdStore(path);
  assert.equal(again.get('old-1', A)?.taskId, 'task_old');
  again.close();
});

test('finished entries go after the retention, prompts once their task exists, both zeroed in the file', () => {
  const path = join(mkdtempSync(join(tmpdir(), 'taskline-store-')), 'tasks.db');
  const now = Date.now();
  const day = 86_400_000;
  const store = new SqliteTaskIdStore(path, { retentionS: 86_400 });
  const at = (t: TrackedTask, updatedAt: number, done: boolean, prompt: string): TrackedTask => ({
    ...t,
    request: { input: prompt },
    done,
    updatedAt,
  });
  store.put(at(entry('expired', A, 'task_1'), now - 2 * day, true, 'PROMPT-EXPIRED'));
  store.put(at(entry('recent', A, 'task_2'), now - day / 2, true, 'PROMPT-RECENT'));
  store.put(at(entry('running', A, 'task_3'), now - 9 * day, false, 'PROMPT-RUNNING'));
  store.put(at(entry('unanswered', A, null), now - 9 * day, false, 'PROMPT-UNANSWERED'));
  store.close();
  // What an older CLI left: a prompt kept after its task was created.
  const raw = new Database(path);
  raw.prepare('UPDATE tasks SET request = ? WHERE key = ?').run('{"input":"PROMPT-RUNNING"}', 'running');
  raw.close();

  const reopened = new SqliteTaskIdStore(path, { retentionS: 86_400 });
  assert.equal(reopened.get('expired', A), null, 'a task the server forgot is forgotten');
  assert.equal(reopened.get('recent', A)?.taskId, 'task_2');
  assert.equal(reopened.get('running', A)?.request, null, 'a created task needs no prompt to resume');
  assert.deepEqual(
    reopened.get('unanswered', A)?.request,
    { input: 'PROMPT-UNANSWERED' },
    'sent again on resume',
  );
  assert.deepEqual(
    reopened.unfinished(A).map((e) => e.key),
    ['running', 'unanswered'],
    'an unfinished entry is never pruned, however old',
  );
  reopened.close();
  const file = readFileSync(path).toString('latin1');
  for (const gone of ['PROMPT-EXPIRED', 'PROMPT-RECENT', 'PROMPT-RUNNING'])
    assert.ok(!file.includes(gone), `${gone} is not left in the file's free space`);
  assert.ok(file.includes('PROMPT-UNANSWERED'), "file.includes('PROMPT-UNANSWERED')");

  const zero = new SqliteTaskIdStore(path, { retentionS: 0 });
  assert.equal(zero.get('recent', A), null, '0: finished entries go when the store is next opened');
  zero.close();
});
