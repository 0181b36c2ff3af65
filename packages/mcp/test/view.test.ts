import assert from 'node:assert/strict';
import { test } from 'node:test';
import { problem, TASK_STATUSES, type TaskRecord } from '@taskline/engine';
import { taskFields } from '../src/index.js';
import { toMcpStatus } from '../src/view.js';
import { legacyTask } from '../src/legacy/wire.js';

/** A tool task whose interrupted attempt was restarted: queued or loading inside the engine. */
const restarted = (status: 'queued' | 'loading'): TaskRecord => ({
  id: 'task_01',
  tenant: 't',
  kind: 'tool',
  status,
  shownStatus: 'running',
  attempt: 2,
  restarts: 1,
  seq: 9,
  createdAt: 0,
  updatedAt: 0,
  endedAt: null,
  expiresAt: null,
  onRestart: 'retry',
  model: 'tools',
  responseId: 'resp_01',
  request: null,
  result: null,
  error: null,
  statusMessage: null,
  leaseOwner: null,
  leaseUntil: null,
  parked: false,
  inputDeadline: null,
  parent: null,
  idempotencyKey: null,
  traceparent: null,
  attemptTraceparent: null,
});

test('the MCP view shows what LMSP shows: a restarted running task stays working (running)', () => {
  for (const status of ['queued', 'loading'] as const) {
    const view = taskFields(restarted(status), 1000);
    assert.equal(view.status, 'working');
    assert.equal(view.statusMessage, 'running');
  }
});

test('a failed task says why in statusMessage on both eras, over its last progress message', () => {
  const failed: TaskRecord = {
    ...restarted('queued'),
    status: 'failed',
    shownStatus: 'failed',
    statusMessage: '2 of 5 prompts done',
    error: problem('tool_failed', 'the model ran out of memory'),
  };
  for (const view of [taskFields(failed, 1000), legacyTask(failed, 1000)]) {
    assert.equal(view.status, 'failed');
    assert.equal(view.statusMessage, 'the model ran out of memory');
  }
});

test('every state projects onto exactly one MCP status', () => {
  const seen = TASK_STATUSES.map((s) => [s, toMcpStatus(s)] as const);
  for (const [s, mcp] of seen) {
    if (['queued', 'loading', 'running', 'cancelling'].includes(s)) {
      assert.equal(mcp.status, 'working');
      assert.equal(mcp.statusMessage !== undefined, true, `${s} says which kind of working`);
    }
  }
  assert.equal(toMcpStatus('succeeded').status, 'completed');
  assert.equal(toMcpStatus('input_required').status, 'input_required');
});
