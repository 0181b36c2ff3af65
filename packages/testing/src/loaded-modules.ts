// A preload (`--import`) that records each module URL a process resolves, one a line, in the file
// named by $TASKLINE_LOADED: what a test reads to show a start loads no module it need not.
import { appendFileSync } from 'node:fs';
import { register } from 'node:module';
import process from 'node:process';
import { isMainThread } from 'node:worker_threads';

// The hooks below run on the loader's own thread, which loads this file again: register once.
if (isMainThread) register(import.meta.url, { data: process.env.TASKLINE_LOADED });

let out = '';
export function initialize(file: string): void {
  out = file;
}

type Next = (specifier: string, context: unknown) => Promise<{ url: string }>;
export async function resolve(specifier: string, context: unknown, next: Next): Promise<{ url: string }> {
  const resolved = await next(specifier, context);
  appendFileSync(out, `${resolved.url}\n`);
  return resolved;
}
