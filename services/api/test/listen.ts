/** An MCP `subscriptions/listen` stream read as raw SSE, and the tasks it follows. */
import { listenTasks } from '@taskline/test-support/mcp';
import { KEY_A, type RedisAndStore } from './helpers.js';

/** A listen as it arrived: the HTTP answer, then the stream's messages and heartbeat comments. */
export interface Listen {
  status: number;
  headers: Headers;
  /** JSON-RPC messages received so far (or the one error reply). */
  messages: Record<string, unknown>[];
  comments: number;
  close(): void;
  done: Promise<void>;
}

/** Opens a listen on `taskIds` (JSON-RPC id `id`) with bearer `key` and reads it until `close()`. */
export async function listen(base: string, taskIds: unknown[], id = 7, key = KEY_A): Promise<Listen> {
  const controller = new AbortController();
  const res = await listenTasks(`${base}/mcp`, key, taskIds, { id, signal: controller.signal });
  const out: Listen = {
    status: res.status,
    headers: res.headers,
    messages: [],
    comments: 0,
    close: () => controller.abort(),
    done: Promise.resolve(),
  };
  if (!(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    out.messages.push((await res.json()) as Record<string, unknown>);
    return out;
  }
  out.done = (async () => {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (frame.startsWith(':')) out.comments++;
          const data = frame.split('\n').find((l) => l.startsWith('data: '));
          if (data) out.messages.push(JSON.parse(data.slice(6)) as Record<string, unknown>);
        }
      }
    } catch (err) {
      if ((err as Error).name !== 'AbortError') throw err;
    }
  })();
  return out;
}

/** `count` unfinished tool tasks of tenant-a (no worker runs them): a listen on them stays open. */
export async function openTasks(stack: RedisAndStore, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const task = await stack.worker.create({
      tenant: 'tenant-a',
      kind: 'tool',
      model: 'tools',
      onRestart: 'retry',
      request: { tool: 'slow_compute', arguments: { seconds: 60 } },
    });
    ids.push(task.id);
  }
  return ids;
}
