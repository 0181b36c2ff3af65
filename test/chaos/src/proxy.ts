/**
 * The chaos run's Redis proxy (`startRedisProxy`) in a process of its own: in the run's process it
 * would relay every command only when the load's event loop let it, and a busy load then reads as
 * a Redis that stopped answering (command timeouts) rather than the short drops the fault means.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { bounded, startRedisProxy } from '@taskline/testing';

/** What the run asks of the proxy: its URL, a drop (resets, then refused connects), its end. */
export interface ChaosProxy {
  readonly url: string;
  /** Resets every connection and refuses new ones for `ms`; resolves once connects are taken again. */
  outage(ms: number): Promise<void>;
  close(): void;
}

type Reply = { url: string } | { done: number };

/** Starts the proxy process in front of the Redis at `target`. */
export async function startProxyProcess(target: string): Promise<ChaosProxy> {
  const child = fork(fileURLToPath(import.meta.url), [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, TL_CHAOS_PROXY_TARGET: target },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const replies = (match: (r: Reply) => boolean) =>
    new Promise<Reply>((resolve, reject) => {
      const onMessage = (r: Reply) => {
        if (!match(r)) return;
        child.off('message', onMessage).off('exit', onExit);
        resolve(r);
      };
      const onExit = () => reject(new Error('the Redis proxy process exited'));
      child.on('message', onMessage).once('exit', onExit);
    });
  const started = (await bounded(
    'the Redis proxy start',
    60_000,
    replies((r) => 'url' in r),
  )) as {
    url: string;
  };
  let next = 0;
  return {
    url: started.url,
    async outage(ms) {
      const id = next++;
      const done = replies((r) => 'done' in r && r.done === id);
      child.send({ id, outage: ms });
      await done;
    },
    close: () => void child.kill('SIGKILL'),
  };
}

// The proxy process itself: started by startProxyProcess, gone with its parent.
const target = process.env.TL_CHAOS_PROXY_TARGET;
if (target && process.send) {
  const proxy = await startRedisProxy(target);
  process.on('message', (m: { id: number; outage: number }) => {
    void proxy.outage(m.outage).then(() => process.send!({ done: m.id }));
  });
  process.on('disconnect', () => process.exit(0));
  process.send({ url: proxy.url });
}
