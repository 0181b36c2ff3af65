/**
 * `pnpm bench:tracing`: the CPU per task of every service with OpenTelemetry tracing off and on,
 * in one run on the same machine (off, on, off again: drift shows as the two offs differing).
 * Tracing on exports to a sink in this process that takes the OTLP requests and drops them.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { connectRedis } from '@taskline/engine';
import { INSTANT } from './queue.js';
import { cpuMeter, startBenchStack, totalMs, type CpuCost } from './stack.js';
import { createMany, waitEnded } from './taskline.js';

const { values: args } = parseArgs({ options: { tasks: { type: 'string', default: '1000' } } });
const TASKS = Number(args.tasks);
const WARMUP = Math.min(100, TASKS);

/** An OTLP/HTTP endpoint that accepts every export and keeps nothing. */
async function startSink(): Promise<{ url: string; requests: () => number; close(): void }> {
  let requests = 0;
  const server = createServer((req, res) => {
    requests++;
    req.resume().on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}`, requests: () => requests, close: () => server.close() };
}

/** CPU per task of each service for TASKS instant tasks, after a warm-up, on a fresh stack. */
async function measure(env: Record<string, string>): Promise<CpuCost> {
  const stack = await startBenchStack({ env });
  const redis = connectRedis(stack.redis.url, 'bench-tracing');
  try {
    await waitEnded(redis, await createMany(stack.apiUrl, WARMUP, 32, INSTANT));
    const procs = Object.fromEntries(stack.services.map((s) => [s.name, s.child.pid!]));
    const meter = cpuMeter(procs);
    await waitEnded(redis, await createMany(stack.apiUrl, TASKS, 32, INSTANT));
    return meter.perTask(TASKS);
  } finally {
    redis.disconnect();
    await stack.stop();
  }
}

const sink = await startSink();
const on = { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_BSP_SCHEDULE_DELAY: '500' };
const runs = { off: await measure({}), on: await measure(on), offAgain: await measure({}) };
sink.close();
const rows = Object.entries(runs).map(([name, cost]) => ({
  name,
  totalMs: totalMs(cost),
  ...cost.msPerTask,
}));
console.table(rows);
console.log(JSON.stringify({ tasks: TASKS, exports: sink.requests(), runs }));
