/**
 * The same-work peer's HTTP side (bench item 9): what a team would build in a week on the same
 * stack. An Express POST writes a record and `queue.add`s a BullMQ job; SSE reads the task's
 * stream with XREAD BLOCK, one Redis connection per reader. No fairness, fencing, idempotency or
 * exactly-once events: the yardstick for what Taskline's guarantees cost.
 */
import { randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import express from 'express';
import { Redis } from 'ioredis';

const url = process.env.BENCH_REDIS_URL!;
const port = Number(process.env.BENCH_PORT);
const PEER_QUEUE = 'bench-peer';

const redis = new Redis(url, { maxRetriesPerRequest: null });
const queue = new Queue(PEER_QUEUE, { connection: { url, maxRetriesPerRequest: null } as never });
const app = express();
app.use(express.json());

app.post('/tasks', async (req, res) => {
  const id = randomUUID();
  await redis.hset(`peer:task:${id}`, 'status', 'queued', 'request', JSON.stringify(req.body));
  await queue.add('generate', { id }, { removeOnComplete: true, removeOnFail: true });
  res.status(202).json({ id });
});

app.get('/tasks/:id/events', async (req, res) => {
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
  const reader = redis.duplicate();
  req.on('close', () => reader.disconnect());
  let last = '0';
  for (;;) {
    const reply = await reader
      .xread('BLOCK', 0, 'STREAMS', `peer:events:${req.params.id}`, last)
      .catch(() => null);
    if (!reply) return;
    for (const [entryId, fields] of reply[0]![1]) {
      last = entryId;
      res.write(`event: ${fields[1]}\ndata: ${fields[3]}\n\n`);
      if (fields[1] === 'done') {
        reader.disconnect();
        res.end();
        return;
      }
    }
  }
});

app.listen(port, '127.0.0.1', () => process.send!({ ready: true }));
