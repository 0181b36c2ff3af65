import type { GenerateRequest, ModelBackend } from './types.js';

export interface Throughput {
  requests: number;
  outputTokens: number;
  seconds: number;
  /** Output tokens of all requests together per wall-clock second. */
  tokensPerSecond: number;
  /** CPU time of this process meanwhile (all threads): steadier than wall time on a shared machine. */
  cpuSeconds: number;
}

/** Runs `concurrency` copies of a request at once on a backend and measures total output speed. */
export async function measureThroughput(
  backend: ModelBackend,
  request: GenerateRequest,
  concurrency: number,
): Promise<Throughput> {
  const started = performance.now();
  const cpuStarted = process.cpuUsage();
  const results = await Promise.all(
    Array.from({ length: concurrency }, (_, i) =>
      backend.generate({ ...request, seed: (request.seed ?? 0) + i }),
    ),
  );
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuStarted);
  const outputTokens = results.reduce((sum, r) => sum + r.outputTokens, 0);
  return {
    requests: concurrency,
    outputTokens,
    seconds,
    tokensPerSecond: outputTokens / seconds,
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
  };
}
