/**
 * The `api` service as deployed, plus the conformance suite's fixtures on `/mcp` (the inline ones
 * of both protocol eras and the durable task tools). Started by `stack.ts` in place of
 * `services/api/src/main.ts`; its workers run `serve-worker.ts`, which registers the same tools.
 * With `CONFORMANCE_TASK_TOOLS=worker` it registers only what runs on the api: the durable
 * fixtures are then the live ones a tool worker serves (`FIXTURE_TOOL_MODULE`), since a built-in
 * name would shadow them.
 */
import { startApi } from '../../services/api/src/start.js';
import {
  conformanceMcpExtensions,
  registerApiConformanceTools,
  registerConformanceTools,
} from './fixtures/index.js';

const tools =
  process.env.CONFORMANCE_TASK_TOOLS === 'worker' ? registerApiConformanceTools : registerConformanceTools;
startApi({ mcpExtensions: { ...conformanceMcpExtensions, tools } });
