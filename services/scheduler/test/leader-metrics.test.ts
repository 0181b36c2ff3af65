import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { freePort } from '@taskline/testing';
import { EngineStack, until } from '@taskline/test-support/engine-stack';

// Autoscaling reads the queue gauges of the leader only (the chart's KEDA query joins them with
// taskline_scheduler_leader): a replica that loses leadership must say so and stop exporting the
// queue it last saw, or its stale gauge keeps workers up (or counts a backlog twice).
let cluster: EngineStack | undefined;
after(() => cluster?.stop());

async function scrape(port: number): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`).catch(() => null);
  return res?.ok ? res.text() : '';
}
const leader = (text: string) => /^taskline_scheduler_leader\{[^}]*\} 1$/m.test(text);
const depth = (text: string) => /^taskline_queue_depth\{[^}]*model="tiny-chat"[^}]*\} [1-9]/m.test(text);

test('a scheduler that loses leadership reports it and stops exporting the queue depth', async () => {
  cluster = await EngineStack.start({ schedulers: 0 });
  const ports = await Promise.all(
    [0, 1].map(async () => ({ control: await freePort(), metrics: await freePort() })),
  );
  const procs = ports.map(
    (p) =>
      cluster!.stack.scheduler(p.control, {
        TASKLINE_METRICS_PORT: String(p.metrics),
        TASKLINE_LEADER_LEASE_MS: '1000',
        TASKLINE_HOST: '127.0.0.1',
      }).child!,
  );
  // No worker: the task waits, and the leader exports it.
  await cluster.create({ input: 'hello' });
  const first = await until('one leader exporting the queue depth', async () => {
    const texts = await Promise.all(ports.map((p) => scrape(p.metrics)));
    const i = texts.findIndex((t) => leader(t) && depth(t));
    return i >= 0 && texts.every((t) => t.includes('taskline_scheduler_leader')) ? i : undefined;
  });
  const other = 1 - first;
  assert.ok(!depth(await scrape(ports[other]!.metrics)), 'the standby exports no queue depth');

  // The leader pauses past its lease; the standby takes over; the old leader wakes up a standby.
  procs[first]!.kill('SIGSTOP');
  await until('the standby to lead and export the queue', async () => {
    const t = await scrape(ports[other]!.metrics);
    return leader(t) && depth(t) ? true : undefined;
  });
  procs[first]!.kill('SIGCONT');
  await until('the old leader to report it stands by, with no queue gauge left', async () => {
    const t = await scrape(ports[first]!.metrics);
    return t && !leader(t) && !depth(t) ? true : undefined;
  });
});
