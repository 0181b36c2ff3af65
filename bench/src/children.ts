import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { SERVICE_NODE } from '@taskline/testing';

/** A TypeScript helper process (bullmq-worker.ts, fanout-writer.ts) with an IPC channel. */
export interface Child {
  proc: ChildProcess;
  send(message: unknown): void;
  /** The next message the child sends. */
  next<T>(): Promise<T>;
  stop(): Promise<void>;
}

export async function forkChild(file: string, env: Record<string, string>): Promise<Child> {
  const proc = fork(fileURLToPath(new URL(file, import.meta.url)), [], {
    // The Node.js Taskline's services run on (SERVICE_NODE), so a baseline is compared on the same runtime.
    execPath: SERVICE_NODE,
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const inbox: unknown[] = [];
  const waiting: ((m: unknown) => void)[] = [];
  proc.on('message', (m) => {
    const w = waiting.shift();
    if (w) w(m);
    else inbox.push(m);
  });
  const child: Child = {
    proc,
    send: (m) => proc.send(m as never),
    next<T>() {
      if (inbox.length) return Promise.resolve(inbox.shift() as T);
      return new Promise<T>((resolve, reject) => {
        const onExit = (code: number | null) => reject(new Error(`${file} exited with ${code}`));
        proc.once('exit', onExit);
        waiting.push((m) => {
          proc.off('exit', onExit);
          resolve(m as T);
        });
      });
    },
    async stop() {
      if (proc.exitCode !== null || proc.signalCode) return;
      const gone = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGKILL');
      await gone;
    },
  };
  await child.next();
  return child;
}
