/**
 * A key revoked with `taskline keys revoke` ends the MCP event streams it opened at their next
 * heartbeat, as it does LMSP's: a 2026-07-28 task listen and a 2025-11-25 `tasks/result` stream.
 * Another key's streams of the same tenant go on.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startMcpStack, until } from '@taskline/test-support/mcp-stack';
import { listenTasks, post2025, rpc } from '@taskline/test-support/mcp';

const CLI = fileURLToPath(new URL('../../cli/bin/taskline.js', import.meta.url));
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** An open SSE response: whether it ended, and how many heartbeat comments it sent so far. */
interface Reading {
  ended: Promise<void>;
  comments: () => number;
  abort: () => void;
}

function read(res: Response, controller: AbortController): Reading {
  let comments = 0;
  assert.equal(res.headers.get('content-type'), 'text/event-stream', `HTTP ${res.status}`);
  const ended = (async () => {
    const reader = res.body!.getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        comments += new TextDecoder().decode(value).split(': keep-alive').length - 1;
      }
    } catch {
      // Aborted by the test.
    }
  })();
  return { ended, comments: () => comments, abort: () => controller.abort() };
}

describe('MCP streams of a revoked API key', () => {
  let stack: Awaited<ReturnType<typeof startMcpStack>>;
  let url: string;
  const cli = async (...args: string[]) => {
    const { stdout } = await promisify(execFile)(process.execPath, [CLI, '--json', ...args], {
      cwd: ROOT,
      env: { ...process.env, REDIS_URL: stack.cluster.stack.redis.url },
    });
    return stdout;
  };

  before(async () => {
    stack = await startMcpStack({
      fixtures: true,
      env: { TASKLINE_API_KEYS: 'tenant-static:key-static-secret', TASKLINE_SSE_HEARTBEAT_MS: '200' },
    });
    url = stack.replicas[0]!.url;
  });
  after(() => stack.stop());

  /** A 2026-07-28 listen on `taskId`. */
  const listen = async (key: string, taskId: string): Promise<Reading> => {
    const controller = new AbortController();
    const res = await listenTasks(url, key, [taskId], { signal: controller.signal });
    return read(res, controller);
  };

  /** A 2025-11-25 session's `tasks/result` on `taskId`. */
  const result = async (key: string, taskId: string): Promise<Reading> => {
    const post = (body: object, session?: string | null, signal?: AbortSignal) =>
      post2025(url, key, body, session, signal);
    const init = await post({
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    });
    const controller = new AbortController();
    const session = init.headers.get('mcp-session-id')!;
    return read(
      await post({ method: 'tasks/result', params: { taskId } }, session, controller.signal),
      controller,
    );
  };

  it("end at their next heartbeat; another key's streams go on", async () => {
    const make = async () =>
      JSON.parse(await cli('keys', 'create', '--tenant', 'tenant-cli')) as { id: string; key: string };
    const [revoked, kept] = [await make(), await make()];
    const created = await rpc(
      url,
      'tools/call',
      { name: 'slow_compute', arguments: { seconds: 60 } },
      { token: revoked.key },
    );
    const taskId = created.message.result.taskId as string;
    const open = async (key: string) => [await listen(key, taskId), await result(key, taskId)];
    const [doomed, going] = [await open(revoked.key), await open(kept.key)];
    await cli('keys', 'revoke', revoked.id);
    // Bounded far past a heartbeat (200 ms), not at a pace a starved host may miss: a stream the
    // revocation left open would go on until its 60 s task ends.
    const ended = (r: Reading) =>
      Promise.race([
        r.ended.then(() => true),
        new Promise((done) => setTimeout(done, 15_000, false).unref()),
      ]);
    for (const r of doomed) assert.equal(await ended(r), true, 'ended at a heartbeat, long before its task');
    for (const r of going) {
      // A heartbeat more than it had: a stream that ended would never send it.
      const comments = r.comments();
      await until('another heartbeat of the kept key’s stream', () =>
        r.comments() > comments ? true : undefined,
      );
      r.abort();
    }
    await rpc(url, 'tasks/cancel', { taskId }, { token: kept.key });
  });
});
