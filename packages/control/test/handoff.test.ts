/** JobQueues: each model's job queued as a dispatch names it, every model's queue on one connection. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { startRedis, until } from '@taskline/testing';
import { dispatchJobId, JobQueues } from '../src/index.js';

test("one connection serves every model's queue, and close ends it", async (t) => {
  const server = await startRedis();
  t.after(() => server.stop());
  const admin = new Redis(server.url);
  t.after(() => admin.disconnect());
  const named = async () =>
    ((await admin.client('LIST')) as string).split('\n').filter((l) => l.includes(' name=job-queues '))
      .length;
  let opened = 0;
  const jobs = new JobQueues(() => {
    opened++;
    return new Redis(server.url, { maxRetriesPerRequest: null, connectionName: 'job-queues' });
  });
  const models = ['tiny-chat', 'instant', 'tool:ci_pipeline'];
  for (const [i, model] of models.entries())
    await jobs.handOff(model, { id: `task_${i}`, tenant: 't1', attempt: 0, seq: 1 });
  assert.equal(opened, 1, 'one connection opened');
  assert.equal(await named(), 1, 'one connection in CLIENT LIST');
  for (const [model, queue] of jobs.opened()) {
    const [job] = await queue.getJobs(['waiting']);
    assert.ok(job, `a job queued for ${model}`);
    assert.equal(job.id, dispatchJobId({ id: job.data.taskId, attempt: 0, seq: 1 }));
  }
  assert.deepEqual(
    jobs.opened().map(([model]) => model),
    models,
  );
  await jobs.close();
  await until('the connection closed', async () => ((await named()) === 0 ? true : undefined));
});
