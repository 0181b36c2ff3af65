// Non-blocking stdout shared by every logger of the process, with a bounded backlog.
import { writeSync } from 'node:fs';

/** Lines of this process dropped because stdout's backlog was full (a metric reads it). */
let droppedTotal = 0;

export function droppedLogLines(): number {
  return droppedTotal;
}

/** Longest wait between tries of a stdout that takes nothing (its reader lags), ms. */
const MAX_RETRY_MS = 50;

/**
 * Stdout, every logger of the process together, one write per turn of the event loop: a write per
 * line was a syscall per request in the api and per task in the worker, and a wake-up of whatever
 * reads the logs, when under load one turn ends many requests at once.
 *
 * A write never waits for the reader: Node makes a pipe or socket on fd 1 non-blocking (the
 * `process.stdout` getter), and what the pipe does not take now waits in a backlog of at most
 * `bufferBytes`, tried again on a timer, so a slow log shipper or a full pipe never stalls the
 * event loop (a blocking write did: every request and stream of the process waited on logging).
 * A line that would overflow the backlog is dropped and counted; once the backlog is empty, one
 * `log_lines_dropped` line says how many. Lines keep their order; what is pending goes out
 * synchronously as the process exits (`process.exit`, an uncaught exception), waiting for the
 * reader there, and lines logged after that at once.
 */
export class StdoutLines {
  private queue: string[] = [];
  /** What the pipe took part of: the rest of it goes first. */
  private head: Buffer | null = null;
  private bytes = 0;
  private dropped = 0;
  private scheduled = false;
  private retryMs = 1;
  private exiting = false;

  /** `notice(n)` makes the line that says `n` lines were dropped. */
  constructor(
    public bufferBytes: number,
    private readonly notice: (dropped: number) => string,
  ) {
    // The getter puts a pipe or socket on fd 1 in non-blocking mode, as Node's own stream uses it.
    void process.stdout;
    process.once('exit', () => {
      this.exiting = true;
      this.flushSync();
    });
  }

  write(line: string): void {
    if (this.exiting) return void this.writeAllSync(Buffer.from(line));
    const size = Buffer.byteLength(line);
    if (this.bytes + size > this.bufferBytes) {
      this.dropped++;
      droppedTotal++;
      return;
    }
    this.queue.push(line);
    this.bytes += size;
    this.schedule(0);
  }

  private schedule(delayMs: number): void {
    if (this.scheduled) return;
    this.scheduled = true;
    const run = () => {
      this.scheduled = false;
      this.flush();
    };
    // Unreferenced: pending lines never keep a process alive; the exit handler writes them.
    if (delayMs === 0) setImmediate(run).unref();
    else setTimeout(run, delayMs).unref();
  }

  /** Writes what the pipe takes now; the rest waits for the next try. */
  private flush(): void {
    for (;;) {
      if (this.head === null) {
        if (this.queue.length === 0 && this.dropped > 0) this.noteDropped();
        if (this.queue.length === 0) return;
        this.head = Buffer.from(this.queue.join(''));
        this.queue = [];
      }
      let written: number;
      try {
        written = writeSync(1, this.head);
      } catch {
        // EAGAIN: the pipe is full. Anything else (EPIPE: the reader is gone) is tried again too,
        // while new lines are dropped and counted; a try costs a syscall.
        written = 0;
      }
      this.bytes -= written;
      if (written < this.head.length) {
        this.head = this.head.subarray(written);
        this.schedule(this.retryMs);
        this.retryMs = Math.min(this.retryMs * 2, MAX_RETRY_MS);
        return;
      }
      this.head = null;
      this.retryMs = 1;
    }
  }

  private noteDropped(): void {
    const line = this.notice(this.dropped);
    this.dropped = 0;
    this.queue.push(line);
    this.bytes += Buffer.byteLength(line);
  }

  private flushSync(): void {
    if (this.dropped > 0) this.noteDropped();
    const rest = Buffer.from(this.queue.join(''));
    this.writeAllSync(this.head === null ? rest : Buffer.concat([this.head, rest]));
    this.queue = [];
    this.head = null;
    this.bytes = 0;
  }

  /** At exit only: waits for the reader, as nothing else is left to run. */
  private writeAllSync(chunk: Buffer): void {
    const sleep = new Int32Array(new SharedArrayBuffer(4));
    let at = 0;
    while (at < chunk.length) {
      try {
        at += writeSync(1, chunk, at);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') return;
        Atomics.wait(sleep, 0, 0, 1);
      }
    }
  }
}
