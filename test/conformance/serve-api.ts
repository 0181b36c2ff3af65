/**
 * The `api` service as deployed, plus the conformance suite's fixtures on `/mcp` (the inline ones
 * of both protocol eras and the durable task tools). Started by `stack.ts` in place of
 * `services/api/src/main.ts`; its workers run `serve-worker.ts`, which registers the same tools.
 */
import { startApi } from '../../services/api/src/start.js';
import { conformanceMcpExtensions, registerConformanceTools } from './fixtures/index.js';

startApi({ mcpExtensions: { ...conformanceMcpExtensions, tools: registerConformanceTools } });
