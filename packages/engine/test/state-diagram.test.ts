// The state diagram in ARCHITECTURE.md is rendered from the transition table; this keeps the two equal.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { renderStateDiagram, TASK_STATUSES, TERMINAL_STATUSES, TRANSITIONS } from '../src/states.js';

const ARCHITECTURE = new URL('../../../ARCHITECTURE.md', import.meta.url);

test('the diagram has exactly the edges of the transition table', () => {
  const edges = renderStateDiagram()
    .split('\n')
    .map((line) => /^\s+(\w+) --> (\w+)$/.exec(line))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => `${m[1]} -> ${m[2]}`)
    .sort();
  const table = TASK_STATUSES.flatMap((from) => TRANSITIONS[from].map((to) => `${from} -> ${to}`)).sort();
  assert.deepEqual(edges, table);
  assert.match(renderStateDiagram(), new RegExp(`\\[\\*\\] --> ${TASK_STATUSES[0]}\\n`));
  for (const s of TERMINAL_STATUSES) assert.match(renderStateDiagram(), new RegExp(`${s} --> \\[\\*\\]\\n`));
});

test('ARCHITECTURE.md shows the diagram rendered from the transition table', () => {
  const doc = readFileSync(ARCHITECTURE, 'utf8');
  const block = /<!-- state-diagram:start -->\n([\s\S]*?)<!-- state-diagram:end -->/.exec(doc);
  assert.ok(
    block,
    'ARCHITECTURE.md has no <!-- state-diagram:start --> ... <!-- state-diagram:end --> block',
  );
  assert.equal(
    block[1],
    renderStateDiagram(),
    'ARCHITECTURE.md differs from the transition table: run `node --import tsx scripts/state-diagram.ts`',
  );
});
