/**
 * The same-work peer's worker (bench item 9): a BullMQ Worker running the tiny-chat model in a
 * thread of its own with the same settings as the gpu-worker, XADDing every step's delta to the
 * task's stream as it comes, then `done`. No lease, no fencing, no coalescing.
 */
import { join } from 'node:path';
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { loadOnnxModelInThread } from '@taskline/inference';

const url = process.env.BENCH_REDIS_URL!;
const model = await loadOnnxModelInThread(join(process.env.BENCH_MODELS_DIR!, 'tiny-chat'), {
  id: 'tiny-chat',
  intraOpThreads: Number(process.env.BENCH_INTRA_OP_THREADS) || undefined,
});
const redis = new Redis(url, { maxRetriesPerRequest: null });

interface PeerRequest {
  input: string;
  max_output_tokens: number;
  temperature: number;
  seed: number;
}

async function generate(id: string): Promise<void> {
  const task = `peer:task:${id}`;
  const events = `peer:events:${id}`;
  const request = JSON.parse((await redis.hget(task, 'request'))!) as PeerRequest;
  await redis.hset(task, 'status', 'running');
  const result = await model.generate(
    {
      messages: [{ role: 'user', content: request.input }],
      maxOutputTokens: request.max_output_tokens,
      temperature: request.temperature,
      seed: request.seed,
    },
    { onStep: (step) => void redis.xadd(events, '*', 'type', 'delta', 'data', JSON.stringify(step.text)) },
  );
  await redis.hset(task, 'status', 'done', 'output_tokens', result.outputTokens);
  await redis.xadd(
    events,
    '*',
    'type',
    'done',
    'data',
    JSON.stringify({ output_tokens: result.outputTokens }),
  );
}

const worker = new Worker('bench-peer', (job) => generate((job.data as { id: string }).id), {
  connection: { url, maxRetriesPerRequest: null } as never,
  concurrency: Number(process.env.BENCH_CONCURRENCY ?? 64),
});
await worker.waitUntilReady();
process.on('message', (m: { stop?: boolean }) => {
  if (m.stop) void worker.close().then(() => process.exit(0));
});
process.send!({ ready: true });
