/**
 * One trace per task across real processes: an api, a scheduler and gpu-workers export to an
 * OTLP/HTTP receiver in this test (the real exporter's JSON), and each task's spans come from all
 * three with the right parents and links, carry the task's attributes, and never its prompt text;
 * a worker's latency histograms carry the task's trace as exemplars (OpenMetrics scrape).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { Stack, until, type ApiService } from '@taskline/testing';
import { FIXTURE_ENTRIES } from '@taskline/test-support/entries';
import { initializeRequest, pollTask, post2025, rpc } from '@taskline/test-support/mcp';
import { OtlpReceiver, type ReceivedSpan } from './otlp-receiver.js';

const KEY = 'trace-key-0123456789';
/** A tenant of its own for the webhook test: its first create finds its endpoint (no cached answer). */
const HOOK_KEY = 'trace-hook-key-0123456789';
const ADMIN_KEY = 'trace-admin-key-0123456789';
/** Text that must appear in no span: each prompt is marked with it. */
const SECRET = 'zebra-marmalade';

let receiver: OtlpReceiver;
let stack: Stack;
let api: ApiService;

before(async () => {
  receiver = await OtlpReceiver.start();
  stack = await Stack.start({
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_BSP_SCHEDULE_DELAY: '50',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test',
      TASKLINE_API_KEYS: `tenant-t:${KEY},tenant-w:${HOOK_KEY}`,
      TASKLINE_WEBHOOK_ALLOW_HTTP: 'true',
      TASKLINE_WEBHOOK_ALLOW_PRIVATE: 'true',
      TASKLINE_WEBHOOK_RELAY_MS: '50',
      TASKLINE_WEBHOOK_RETRY_BASE_MS: '100',
      TASKLINE_WEBHOOK_RETRY_CAP_MS: '500',
      TASKLINE_ADMIN_KEYS: ADMIN_KEY,
      TASKLINE_TRACE_URL_TEMPLATE: 'https://traces.example/trace/{trace_id}',
      TASKLINE_LOG_LEVEL: 'info',
      TASKLINE_LEASE_MS: '1500',
      TASKLINE_RECOVERY_INTERVAL_MS: '200',
    },
    workers: 1,
    apis: 1,
    // The conformance fixtures beside the built-in tools: `confirm_delete` asks for input.
    entries: FIXTURE_ENTRIES,
  });
  api = stack.apis[0]!;
});
after(async () => {
  await stack.stop();
  await receiver.close();
});

/** A caller's own trace context: the task's trace continues it. */
function callerContext() {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

async function createLmsp(traceparent: string, input: Record<string, unknown>, key = KEY) {
  const res = await fetch(`${api.base}/lmsp/v1/tasks`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, traceparent },
    body: JSON.stringify({ type: 'response', input: { model: 'tiny-chat', ...input }, on_restart: 'retry' }),
  });
  assert.equal(res.status, 202);
  return { task: (await res.json()) as { id: string }, traceresponse: res.headers.get('traceresponse') };
}

async function lmspEnded(id: string, key = KEY): Promise<void> {
  await until(
    `task ${id} to end`,
    async () => {
      const res = await fetch(`${api.base}/lmsp/v1/tasks/${id}`, {
        headers: { authorization: `Bearer ${key}` },
      });
      const task = (await res.json()) as { status: string };
      return ['succeeded', 'failed', 'cancelled'].includes(task.status) ? task : undefined;
    },
    90_000,
  );
}

/**
 * Waits for spans named `names` in the trace (a name twice: two such spans), then returns the
 * trace. Spans leave each process as they end, a parent after its children.
 */
/** Spans whose parent another service exports: the attempt (the hand-off's), the create's children. */
const CONTINUES_ANOTHER_PROCESS = new Set([
  'task.attempt',
  'task.dispatch',
  'task.restart',
  'task.input_wait',
  'webhook.delivery',
]);

async function spansOf(
  caller: { traceId: string; spanId: string },
  names: string[],
): Promise<ReceivedSpan[]> {
  const wanted = new Map<string, number>();
  for (const n of names) wanted.set(n, (wanted.get(n) ?? 0) + 1);
  // Each service exports on its own schedule: a worker's attempt can arrive before the
  // scheduler's hand-off it continues. Wait for the parent of every span that continues another
  // process's (besides the caller's own span), not only for the names. (A SIGKILLed attempt's
  // own steps stay orphans: its span never left the worker.)
  const whole = (spans: ReceivedSpan[]) =>
    spans.every(
      (s) =>
        !CONTINUES_ANOTHER_PROCESS.has(s.name) ||
        s.parentSpanId === caller.spanId ||
        spans.some((p) => p.spanId === s.parentSpanId),
    );
  return until(
    `spans ${names.join(', ')} in trace ${caller.traceId}`,
    () => {
      const spans = receiver.trace(caller.traceId);
      const enough = [...wanted].every(([n, count]) => spans.filter((s) => s.name === n).length >= count);
      return enough && whole(spans) ? spans : undefined;
    },
    30_000,
  ).catch((err: unknown) => {
    const seen = receiver.trace(caller.traceId).map((s) => `${s.service}:${s.name}`);
    throw new Error(`${String(err)}; seen ${seen.join(' ')}`);
  });
}

const named = (spans: ReceivedSpan[], name: string, where: (s: ReceivedSpan) => boolean = () => true) => {
  const found = spans.filter((s) => s.name === name && where(s));
  assert.ok(found.length > 0, `a ${name} span`);
  return found;
};
const parentOf = (spans: ReceivedSpan[], span: ReceivedSpan) =>
  spans.find((s) => s.spanId === span.parentSpanId);

/** The one link of `span`, to a span of the same trace, and what it says that span is. */
function linkOf(span: ReceivedSpan, kind: string): string {
  assert.equal(span.links.length, 1, `${span.name} has one link`);
  const [link] = span.links;
  assert.equal(link!.traceId, span.traceId, 'the link stays in the task’s trace');
  assert.equal(link!.attributes['taskline.link'], kind);
  return link!.spanId;
}

const attemptNo = (span: ReceivedSpan) => Number(span.attributes['taskline.attempt']);

function assertNoPromptText(): void {
  for (const body of receiver.bodies)
    assert.ok(!body.includes(SECRET), 'no prompt text in any exported span');
}

/** Who dispatches a task and hands its job over: the scheduler leader, or the api on a lent slot. */
const DISPATCHERS = ['taskline-scheduler', 'taskline-api'];

/** The chain from the api's create through the hand-off of its job to one worker attempt. */
function assertTaskChain(spans: ReceivedSpan[], taskId: string, callerSpanId?: string): ReceivedSpan[] {
  const [create] = named(spans, 'task.create', (s) => s.attributes['taskline.task.id'] === taskId);
  assert.equal(create!.service, 'taskline-api');
  if (callerSpanId) assert.equal(create!.parentSpanId, callerSpanId, 'the create continues the caller');
  assert.equal(create!.attributes['taskline.tenant'], 'tenant-t');
  const dispatches = named(spans, 'task.dispatch', (s) => s.attributes['taskline.task.id'] === taskId);
  for (const d of dispatches) {
    // The leader's round, or the create itself on a slot the leader lent (an idle model).
    assert.ok(DISPATCHERS.includes(d.service), `dispatched by ${d.service}`);
    assert.equal(d.parentSpanId, create!.spanId, 'each dispatch sits under the create');
  }
  const jobs = named(spans, 'task.attempt', (s) => s.attributes['taskline.task.id'] === taskId);
  // A stale job (its task moved on: a dead worker's, back in the queue) starts no attempt.
  const attempts = jobs.filter((a) => a.attributes['taskline.outcome'] !== 'refused');
  for (const a of jobs.filter((j) => !attempts.includes(j)))
    assert.equal(a.attributes['taskline.attempt'], undefined, 'a refused job has no attempt');
  for (const a of attempts) {
    assert.equal(a.service, 'taskline-worker');
    const handoff = parentOf(spans, a)!;
    assert.equal(handoff.name, 'task.handoff', 'an attempt continues the hand-off of its job');
    assert.ok(
      dispatches.some((d) => d.spanId === handoff.parentSpanId && d.service === handoff.service),
      'the hand-off continues a dispatch of the same service',
    );
    assert.equal(typeof a.attributes['taskline.attempt'], 'number');
    assert.equal(a.attributes['taskline.model'], create!.attributes['taskline.model']);
    // An attempt that parked for its caller's input ends without a finish: the task is not its to end.
    const steps =
      a.attributes['taskline.outcome'] === 'parked'
        ? ['task.claim', 'task.run']
        : ['task.claim', 'task.run', 'task.finish'];
    for (const step of steps)
      assert.ok(
        spans.some((s) => s.name === step && s.parentSpanId === a.spanId),
        `${step} under the attempt`,
      );
  }
  return attempts;
}

/** What Prometheus sends when it stores exemplars: OpenMetrics first, the text format after. */
const OPENMETRICS_FIRST =
  'application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2';

/**
 * Scrapes a worker's /metrics as Prometheus does: its queue-wait histogram carries the attempt's
 * trace and span ids as an exemplar (observed at the claim, in the attempt's span); a scrape that
 * does not ask for OpenMetrics gets the Prometheus text, without exemplars.
 */
async function assertExemplar(
  worker: { readyLine: Record<string, unknown> | null },
  traceId: string,
  spanId: string,
): Promise<void> {
  const url = `http://127.0.0.1:${String(worker.readyLine?.metrics_port)}/metrics`;
  const om = await fetch(url, { headers: { accept: OPENMETRICS_FIRST } });
  assert.match(om.headers.get('content-type') ?? '', /^application\/openmetrics-text; version=1\.0\.0/);
  const exemplar = new RegExp(
    `^taskline_task_queue_wait_seconds_bucket\\{.*\\} \\d+ # \\{trace_id="${traceId}",span_id="${spanId}"\\} `,
    'm',
  );
  assert.match(await om.text(), exemplar);
  const plain = await fetch(url);
  assert.match(plain.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  const text = await plain.text();
  assert.match(text, /^taskline_task_queue_wait_seconds_bucket\{/m);
  assert.doesNotMatch(text, /trace_id=/);
}

test('an LMSP task is one trace from the caller through the api, the scheduler and the worker', async () => {
  const caller = callerContext();
  const { task, traceresponse } = await createLmsp(caller.traceparent, {
    input: `Say hello. ${SECRET}`,
    max_output_tokens: 8,
  });
  assert.equal(traceresponse?.split('-')[1], caller.traceId, 'the api returns the trace id');
  await lmspEnded(task.id);
  // The console's task page shows it, linked through TASKLINE_TRACE_URL_TEMPLATE.
  const admin = await fetch(`${api.base}/admin/v1/tasks/${task.id}`, {
    headers: { authorization: `Bearer ${ADMIN_KEY}` },
  });
  const view = ((await admin.json()) as { task: Record<string, unknown> }).task;
  assert.equal(view.trace_id, caller.traceId);
  assert.equal(view.trace_url, `https://traces.example/trace/${caller.traceId}`);
  const spans = await spansOf(caller, ['task.create', 'task.attempt', 'task.decode']);
  const [attempt] = assertTaskChain(spans, task.id, caller.spanId);
  const run = spans.find((s) => s.name === 'task.run' && s.parentSpanId === attempt!.spanId)!;
  const [prefill] = named(spans, 'task.prefill', (s) => s.parentSpanId === run.spanId);
  const [decode] = named(spans, 'task.decode', (s) => s.parentSpanId === run.spanId);
  assert.ok(
    Number(prefill!.attributes['gen_ai.usage.input_tokens']) > 0,
    "Number(prefill!.attributes['gen_ai.usage.input_tokens']) > 0",
  );
  assert.ok(
    Number(decode!.attributes['gen_ai.usage.output_tokens']) > 0,
    "Number(decode!.attributes['gen_ai.usage.output_tokens']) > 0",
  );
  named(spans, 'task.model_load', (s) => s.parentSpanId === run.spanId);
  named(spans, 'task.admission');
  assert.equal(attempt!.links.length, 0, 'a first attempt links to nothing');
  await assertExemplar(stack.workers[0]!, caller.traceId, attempt!.spanId);
  const services = new Set(spans.map((s) => s.service));
  assert.ok(services.has('taskline-api') && services.has('taskline-worker'), [...services].join());
  assert.ok(
    [...services].every((s) => [...DISPATCHERS, 'taskline-worker'].includes(s)),
    [...services].join(),
  );
  assertNoPromptText();
});

test('the OpenAI route continues the caller’s trace and returns its id', async () => {
  const caller = callerContext();
  const res = await fetch(`${api.base}/lmsp/v1/responses`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${KEY}`,
      traceparent: caller.traceparent,
    },
    body: JSON.stringify({
      model: 'tiny-chat',
      input: `Hi. ${SECRET}`,
      max_output_tokens: 4,
      background: true,
    }),
  });
  assert.equal(res.status, 202, 'a background response is accepted');
  const { id } = (await res.json()) as { id: string };
  assert.equal(res.headers.get('traceresponse')?.split('-')[1], caller.traceId);
  const taskId = `task_${id.slice('resp_'.length)}`;
  await lmspEnded(taskId);
  const spans = await spansOf(caller, ['task.create', 'task.attempt']);
  assertTaskChain(spans, taskId, caller.spanId);
  assertNoPromptText();
});

test('a generation that claims with its first delta keeps its claim and its number on its attempt', async () => {
  // The model loaded by a first task, the next starts before its claim and claims with its first
  // delta, from within its run (docs/engine.md): the claim's span and the attempt number still
  // belong to the attempt, not the run.
  const warm = await createLmsp(callerContext().traceparent, { input: 'Hi.', max_output_tokens: 2 });
  await lmspEnded(warm.task.id);
  const caller = callerContext();
  const { task } = await createLmsp(caller.traceparent, { input: `Go on. ${SECRET}`, max_output_tokens: 48 });
  await lmspEnded(task.id);
  const spans = await spansOf(caller, ['task.create', 'task.attempt', 'task.decode']);
  const [attempt] = assertTaskChain(spans, task.id, caller.spanId);
  named(spans, 'task.claim', (s) => s.parentSpanId === attempt!.spanId);
  assert.equal(attempt!.attributes['taskline.attempt'], 1);
});

test('an MCP tool task and its child generation are one trace (_meta.traceparent)', async () => {
  const caller = callerContext();
  const reply = await rpc(
    `${api.base}/mcp`,
    'tools/call',
    { name: 'generate', arguments: { model: 'tiny-chat', input: `Say hi. ${SECRET}`, max_output_tokens: 6 } },
    { token: KEY, meta: { traceparent: caller.traceparent } },
  );
  const created = reply.message.result as { taskId: string; _meta?: Record<string, unknown> };
  assert.ok(created?.taskId, JSON.stringify(reply.message));
  assert.equal(created._meta?.['io.taskline/trace-id'], caller.traceId);
  await pollTask(`${api.base}/mcp`, created.taskId, (t: { status: string }) => t.status === 'completed', {
    token: KEY,
    timeoutMs: 90_000,
  });
  // Two of each: the tool task's and its child's.
  const both = ['task.create', 'task.attempt', 'task.attempt', 'task.finish', 'task.finish', 'task.prefill'];
  const spans = await spansOf(caller, both);
  const [toolAttempt] = assertTaskChain(spans, created.taskId, caller.spanId);
  const toolRun = spans.find((s) => s.name === 'task.run' && s.parentSpanId === toolAttempt!.spanId)!;
  // The child's trace context is the tool task's run: its dispatch sits under it.
  const childDispatch = named(spans, 'task.dispatch', (s) => s.parentSpanId === toolRun.spanId);
  const childId = String(childDispatch[0]!.attributes['taskline.task.id']);
  assert.notEqual(childId, created.taskId);
  const childAttempts = named(spans, 'task.attempt', (s) => s.attributes['taskline.task.id'] === childId);
  assert.equal(childAttempts[0]!.service, 'taskline-worker');
  named(spans, 'task.decode');
  assertNoPromptText();
});

test('an input-required wait is a span of the task’s trace, from the park to the answer', async () => {
  const caller = callerContext();
  const url = `${api.base}/mcp`;
  const created = await rpc(
    url,
    'tools/call',
    { name: 'confirm_delete', arguments: { path: '/x' } },
    { token: KEY, meta: { traceparent: caller.traceparent } },
  );
  const taskId = (created.message.result as { taskId: string }).taskId;
  await pollTask(url, taskId, (t: { status: string }) => t.status === 'input_required', { token: KEY });
  await rpc(
    url,
    'tasks/update',
    { taskId, inputResponses: { confirm: { action: 'accept', content: { confirm: 'yes' } } } },
    { token: KEY },
  );
  await pollTask(url, taskId, (t: { status: string }) => t.status === 'completed', { token: KEY });
  const spans = await spansOf(caller, ['task.input_wait', 'task.attempt', 'task.attempt']);
  const [wait] = named(spans, 'task.input_wait');
  assert.equal(wait!.service, 'taskline-api');
  assert.equal(wait!.attributes['taskline.task.id'], taskId);
  assert.equal(wait!.parentSpanId, spans.find((s) => s.name === 'task.create')!.spanId);
  // The attempt that parked and the one the answer queued, both in the trace: the second links to
  // the first.
  const attempts = assertTaskChain(spans, taskId, caller.spanId);
  const parked = attempts.find((a) => a.attributes['taskline.outcome'] === 'parked')!;
  const resumed = attempts.find((a) => attemptNo(a) === attemptNo(parked) + 1)!;
  assert.ok(resumed, 'the attempt after the answer');
  assert.equal(linkOf(resumed, 'previous_attempt'), parked.spanId);
  assert.equal(linkOf(wait!, 'parked_attempt'), parked.spanId, 'the wait links to the attempt that parked');
});

/** The first server request a 2025-11-25 `tasks/result` stream puts to `session`, read off the SSE. */
async function firstQuestion(session: string, taskId: string): Promise<string> {
  const abort = new AbortController();
  const res = await post2025(
    `${api.base}/mcp`,
    KEY,
    { id: 7, method: 'tasks/result', params: { taskId } },
    session,
    abort.signal,
  );
  assert.equal(res.status, 200);
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      assert.ok(!done, `the stream ended before a question: ${buffered}`);
      buffered += value;
      for (const line of buffered.split('\n')) {
        if (!line.startsWith('data: ')) continue;
        const message = JSON.parse(line.slice(6)) as { id?: unknown; method?: string };
        if (message.method === 'elicitation/create') return String(message.id);
      }
    }
  } finally {
    abort.abort();
  }
}

test('an input wait answered over the MCP 2025-11-25 wire is a span of the task’s trace', async () => {
  const caller = callerContext();
  const url = `${api.base}/mcp`;
  // A session that declares elicitation: questions are put only to callers that can answer.
  const init = await post2025(url, KEY, initializeRequest('2025-11-25', { elicitation: {} }));
  assert.equal(init.status, 200);
  const session = init.headers.get('mcp-session-id')!;
  const call = await post2025(
    url,
    KEY,
    {
      method: 'tools/call',
      params: {
        name: 'confirm_delete',
        arguments: { path: '/y' },
        task: { ttl: 60_000 },
        _meta: { traceparent: caller.traceparent },
      },
    },
    session,
  );
  const created = /"taskId":"([^"]+)"/.exec(await call.text());
  assert.ok(created, 'a task was created');
  const taskId = created[1]!;
  await pollTask(url, taskId, (t: { status: string }) => t.status === 'input_required', { token: KEY });
  const question = await firstQuestion(session, taskId);
  const answered = await post2025(
    url,
    KEY,
    { id: question, result: { action: 'accept', content: { confirm: 'yes' } } },
    session,
  );
  assert.ok(answered.status < 300, String(answered.status));
  await pollTask(url, taskId, (t: { status: string }) => t.status === 'completed', { token: KEY });
  const spans = await spansOf(caller, ['task.input_wait', 'task.attempt', 'task.attempt']);
  const [wait] = named(spans, 'task.input_wait');
  assert.equal(wait!.service, 'taskline-api');
  assert.equal(wait!.attributes['taskline.task.id'], taskId);
  assert.equal(wait!.attributes['taskline.tenant'], 'tenant-t');
  assert.equal(wait!.parentSpanId, spans.find((s) => s.name === 'task.create')!.spanId);
  const parked = assertTaskChain(spans, taskId, caller.spanId).find(
    (a) => a.attributes['taskline.outcome'] === 'parked',
  );
  assert.equal(linkOf(wait!, 'parked_attempt'), parked!.spanId);
});

test('a task restarted after its worker is SIGKILLed stays one trace, the restart in it', async () => {
  const caller = callerContext();
  const slow = stack.worker({ TASKLINE_WORKER_MIN_STEP_MS: '200' });
  await slow.up;
  // The first worker stops taking work: the slow one runs the task, then dies.
  await stack.workers[0]!.stop();
  const { task } = await createLmsp(caller.traceparent, {
    input: `Tell me a long story about the sea. ${SECRET}`,
    seed: 22,
    temperature: 2,
    max_output_tokens: 40,
  });
  await spansOf(caller, ['task.claim']);
  await slow.kill('SIGKILL');
  const fresh = stack.worker();
  await fresh.up;
  await lmspEnded(task.id);
  // The killed worker's job comes back once and its claim is refused: that attempt span may come
  // first. The wait is for the attempt that ran (the killed one's span never left its worker).
  await until(
    'the attempt that finished the task',
    () =>
      receiver
        .trace(caller.traceId)
        .some((s) => s.name === 'task.attempt' && s.attributes['taskline.outcome'] !== 'refused') ||
      undefined,
    30_000,
  );
  const spans = await spansOf(caller, ['task.restart', 'task.attempt']);
  const [restart] = named(spans, 'task.restart');
  assert.equal(restart!.service, 'taskline-scheduler');
  assert.equal(restart!.attributes['taskline.task.id'], task.id);
  assert.equal(restart!.attributes['taskline.restart.policy'], 'retry');
  const create = spans.find((s) => s.name === 'task.create')!;
  assert.equal(restart!.parentSpanId, create.spanId, 'the restart sits under the task');
  assert.ok(named(spans, 'task.dispatch').length >= 2, 'dispatched again after the restart');
  const attempts = assertTaskChain(spans, task.id, caller.spanId);
  const later = attempts.filter((a) => attemptNo(a) >= 2).sort((a, b) => attemptNo(a) - attemptNo(b))[0];
  assert.ok(later, 'a later attempt finished it');
  // The killed attempt never ended, so its span never left the worker; its claim did, under it.
  // The restart and the next attempt both link to it.
  const lapsed = linkOf(later, 'previous_attempt');
  assert.ok(!attempts.some((a) => a.spanId === lapsed), 'the killed attempt’s span was lost with it');
  named(spans, 'task.claim', (s) => s.parentSpanId === lapsed);
  assert.equal(linkOf(restart!, 'lapsed_attempt'), lapsed);
  assertNoPromptText();
});

test('each webhook delivery attempt is a client span of its task’s trace, under the create', async () => {
  // The endpoint fails its first POST: the retry is a second attempt, a second span.
  const statuses: number[] = [];
  const receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.statusCode = statuses.length === 0 ? 500 : 200;
      statuses.push(res.statusCode);
      res.end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  try {
    const hook = await fetch(`${api.base}/lmsp/v1/webhooks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${HOOK_KEY}` },
      body: JSON.stringify({
        url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`,
        events: ['task.ended'],
      }),
    });
    assert.equal(hook.status, 201, await hook.clone().text());
    const caller = callerContext();
    const { task } = await createLmsp(
      caller.traceparent,
      { input: `Hi. ${SECRET}`, max_output_tokens: 2 },
      HOOK_KEY,
    );
    await lmspEnded(task.id, HOOK_KEY);
    await until('the delivery to succeed after a failed attempt', () =>
      statuses.includes(200) ? true : undefined,
    );
    const spans = await spansOf(caller, ['webhook.delivery', 'webhook.delivery']);
    const create = spans.find((s) => s.name === 'task.create')!;
    const deliveries = named(spans, 'webhook.delivery').sort(
      (a, b) =>
        Number(a.attributes['taskline.webhook.attempt']) - Number(b.attributes['taskline.webhook.attempt']),
    );
    assert.deepEqual(
      deliveries.map((d) => [
        d.attributes['taskline.webhook.attempt'],
        d.attributes['http.response.status_code'],
        d.attributes['taskline.outcome'],
      ]),
      [
        [1, 500, 'failed'],
        [2, 200, 'ok'],
      ],
    );
    for (const d of deliveries) {
      assert.equal(d.service, 'taskline-scheduler');
      assert.equal(d.kind, 3, 'a client span');
      assert.equal(d.parentSpanId, create.spanId, 'under the task’s create');
      assert.equal(d.attributes['taskline.tenant'], 'tenant-w');
      assert.ok(
        String(d.attributes['taskline.webhook.message']).includes(task.id),
        "String(d.attributes['taskline.webhook.message']).includes(task.id)",
      );
    }
    assertNoPromptText();
  } finally {
    await new Promise((resolve) => receiver.close(resolve));
  }
});
