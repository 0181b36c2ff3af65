/**
 * A create's round trips on the api's connection, on LMSP and on MCP: its tenant's webhook
 * question goes out beside the rate limit's (the record then waits for no read), and its place
 * under the cap with the record's writes (one fsync for both, not a second durable step before
 * the reply).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isCluster } from '@taskline/engine';
import { KEY_A, mcpCall, useStackWithApi, type InProcessApi } from './helpers.js';

let api: InProcessApi;
useStackWithApi((_stack, a) => (api = a));

test('an LMSP create asks its webhook question beside the rate limit and writes its place with its record', async () => {
  const sent = await sentBy(async () => {
    const res = await fetch(`${api.base}/lmsp/v1/tasks`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${KEY_A}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({
        type: 'response',
        input: { model: 'tiny-chat', input: 'x' },
        on_restart: 'fail',
      }),
    });
    assert.equal(res.status, 202, await res.text());
  });
  assertOneRoundTripEach(sent);
});

test('an MCP tool task asks its webhook question beside the rate limit and writes its place with its record', async () => {
  const sent = await sentBy(async () => {
    const res = await mcpCall(api.base, 'tools/call', {
      name: 'generate',
      arguments: { model: 'tiny-chat', input: 'x', max_output_tokens: 4 },
    });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    assert.match(text, /"taskId"/);
  });
  assertOneRoundTripEach(sent);
  // Its entries in the tenant's tool-task list go out with the record's writes on one Redis
  // (sent ahead of them, so run first); a cluster keeps them on another node and writes them first.
  const journal = sent.commands.findIndex((c) => c[0] === 'zadd' && c[1] === 'tl:{sched}:intake');
  const listed = sent.commands.flatMap((c, i) =>
    c[0] === 'zadd' && c[1]!.startsWith('tl:mcp:tasks:{tenant-a}') ? [i] : [],
  );
  assert.equal(listed.length, 2, 'the list and its unfinished entries');
  assert.ok(
    listed.every((i) => i < journal),
    'listed before the record is written',
  );
  if (!isCluster(api.redis))
    assert.ok(
      listed.every((i) => sent.answeredBy[journal]! <= i),
      'no reply awaited between the list entries and the record',
    );
});

interface Sent {
  commands: string[][];
  /** How many commands had been sent when the rate limit's reply came. */
  byRateReply: number;
  /** Per command, how many of the commands sent before it had been answered (in order) by then. */
  answeredBy: number[];
}

/** The commands the api's connection sent while `request` ran. */
async function sentBy(request: () => Promise<void>): Promise<Sent> {
  // Connected first: ioredis sends the commands it queued while connecting a second time.
  await api.redis.ping();
  // Each test's first create of the second: the webhook answer is not cached yet.
  await new Promise((resolve) => setTimeout(resolve, 1100));
  const sent: Sent = { commands: [], byRateReply: Infinity, answeredBy: [] };
  /** The commands answered so far, in the order sent (one connection answers in that order). */
  let answered = 0;
  const original = api.redis.sendCommand.bind(api.redis);
  api.redis.sendCommand = ((command: { name: string; args: unknown[]; promise: Promise<unknown> }) => {
    const args = [command.name, ...command.args.map(String)];
    sent.commands.push(args);
    sent.answeredBy.push(answered);
    const count = sent.commands.length;
    void command.promise.finally(() => (answered = Math.max(answered, count)));
    if (args[0] === 'evalsha' && args.includes('tl:api:rate:{tenant-a}'))
      void command.promise.finally(() => (sent.byRateReply = Math.min(sent.byRateReply, count)));
    return original(command as never);
  }) as typeof api.redis.sendCommand;
  try {
    await request();
  } finally {
    api.redis.sendCommand = original;
  }
  return sent;
}

function assertOneRoundTripEach({ commands, byRateReply }: Sent): void {
  const at = (what: string, match: (c: string[]) => boolean) => {
    const i = commands.findIndex(match);
    assert.ok(i >= 0, `${what} sent: ${JSON.stringify(commands.map((c) => c.slice(0, 3)))}`);
    return i;
  };
  const question = at('the webhook question', (c) => c[0] === 'sismember' && c.includes('tenant-a'));
  // reservation_commit.lua names the unfinished set alone; the rate limit's script names two keys.
  const place = at(
    'the place',
    (c) => c[0] === 'evalsha' && c[2] === '1' && c[3] === 'tl:api:active:{tenant-a}',
  );
  const journal = at('the journal entry', (c) => c[0] === 'zadd' && c[1] === 'tl:{sched}:intake');
  assert.ok(question < byRateReply, 'the question goes before the rate limit answers');
  assert.equal(commands.filter((c) => c[0] === 'sismember').length, 1, "the record's question is that one");
  assert.equal(journal, place + 1, "the place goes with the record's writes");
}
