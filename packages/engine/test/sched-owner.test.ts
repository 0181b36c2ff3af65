// The lint check that keeps the scheduler's index to its owner (scripts/check-sched.ts).
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { schedLeaks } from '../../../scripts/check-sched.js';

function workspace(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'check-sched-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

test('check-sched fails on shipped code outside the owner that reaches the scheduler index', () => {
  const root = workspace({
    'packages/engine/src/sched/index.ts': "export const ready = 'tl:{sched}:ready'; // the owner",
    'packages/engine/src/keys.ts': "export { schedulerKeys } from './sched/keys.js';",
    'packages/engine/src/worker-index.ts': "await redis.zadd('tl:{sched}:tools', 1, id);",
    'packages/tools/src/registry.ts': "import { schedulerKeys } from '@taskline/engine/keys';",
    'services/api/src/held.ts': "await core.scripts.lease_index(key, 1000, 'GT', id);",
    'services/scheduler/src/round.ts': 'loadSchedulerScripts(redis).dispatch(...keys);',
    'services/scheduler/test/round.test.ts': "await redis.del('tl:{sched}:models');",
    'bench/src/timeline.ts': "const key = 'tl:{sched}:inflight';",
  });
  try {
    assert.deepEqual(schedLeaks(root).sort(), [
      'packages/engine/src/worker-index.ts: names a `{sched}` key; use the operations of packages/engine/src/sched/',
      'packages/tools/src/registry.ts: uses `schedulerKeys`; use the operations of packages/engine/src/sched/',
      'services/api/src/held.ts: runs a script that writes the scheduler index; use the operations of packages/engine/src/sched/',
      'services/scheduler/src/round.ts: runs a script that writes the scheduler index; use the operations of packages/engine/src/sched/',
    ]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('only the owner reaches the scheduler index in this workspace', () => {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
  assert.deepEqual(schedLeaks(root), []);
});
