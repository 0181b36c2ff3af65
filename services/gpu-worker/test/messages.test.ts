import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TasklineError } from '@taskline/engine';
import { toMessages } from '../src/response.js';

test('LMSP input renders as chat messages; developer instructions are system messages', () => {
  const messages = toMessages({
    model: 'tiny-chat',
    instructions: 'Be brief.',
    input: [
      { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'No lists.' }] },
      { type: 'message', role: 'user', content: 'Hi' },
    ],
  });
  assert.deepEqual(messages, [
    { role: 'system', content: 'Be brief.' },
    { role: 'system', content: 'No lists.' },
    { role: 'user', content: 'Hi' },
  ]);
});

test('an unknown role is invalid_request, also one named like an object property', () => {
  for (const role of ['tool', 'constructor', '__proto__']) {
    assert.throws(
      () => toMessages({ model: 'tiny-chat', input: [{ type: 'message', role, content: 'x' }] }),
      (err: unknown) => err instanceof TasklineError && err.code === 'invalid_request',
    );
  }
});
