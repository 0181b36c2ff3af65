// `helm test`: through the api's Service, creates a task and reads its events to the end, then
// creates another and cancels it. Exits 1 with the failing step's reason.
import console from 'node:console';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';

const { fetch, AbortSignal } = globalThis;
const base = process.env.TASKLINE_URL;
const model = process.env.TASKLINE_TEST_MODEL;
// The first `tenant:key` of TASKLINE_API_KEYS, unless a key of its own is given.
const key =
  process.env.TASKLINE_TEST_API_KEY || (process.env.TASKLINE_API_KEYS ?? '').split(',')[0].split(':')[1];

function fail(step, detail) {
  console.error(JSON.stringify({ level: 'error', msg: 'helm_test_failed', step, detail }));
  process.exit(1);
}

async function call(method, path, body) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body && JSON.stringify(body),
    signal: AbortSignal.timeout(120_000),
  });
  return { status: res.status, body: await res.text() };
}

async function createTask(input) {
  const created = await call('POST', '/lmsp/v1/tasks', { type: 'response', input: { model, input } });
  if (created.status !== 202) fail('create', created);
  return JSON.parse(created.body).id;
}

async function readEventsToEnd(id) {
  const res = await fetch(`${base}/lmsp/v1/tasks/${id}/events`, {
    headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' },
    signal: AbortSignal.timeout(300_000),
  });
  if (res.status !== 200) fail('events', { status: res.status, body: await res.text() });
  const text = await res.text(); // the stream ends with the task
  if (!/^event: response\.completed$/m.test(text)) fail('events', text.slice(-2000));
}

async function cancelTask(id) {
  const cancel = await call('POST', `/lmsp/v1/tasks/${id}/cancel`);
  if (![200, 202].includes(cancel.status)) fail('cancel', cancel);
  for (const end = Date.now() + 60_000; Date.now() < end; await sleep(500)) {
    const task = await call('GET', `/lmsp/v1/tasks/${id}`);
    if (JSON.parse(task.body).status === 'cancelled') return;
  }
  fail('cancel', 'not cancelled within 60 s');
}

if (!key) fail('credential', 'no API key: set secrets.apiKeys or tests.apiKeySecret');
await readEventsToEnd(await createTask('Say hello.'));
await cancelTask(await createTask('Write a long story.'));
console.log(JSON.stringify({ level: 'info', msg: 'helm_test_passed' }));
