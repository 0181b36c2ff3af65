/**
 * The `gpu-worker` service as deployed, plus the conformance suite's task tools (the ones
 * `serve-api.ts` lists). Started by `stack.ts` in place of `services/gpu-worker/src/main.ts`.
 */
import { startWorker } from '../../services/gpu-worker/src/start.js';
import { registerConformanceTools } from './fixtures/index.js';

await startWorker({ extendTools: registerConformanceTools });
