// Preloaded into a CLI process by cli.test.ts: records each module URL it resolves, one a line, in $TASKLINE_LOADED.
import { appendFileSync } from 'node:fs';
import { register } from 'node:module';
import process from 'node:process';
import { isMainThread } from 'node:worker_threads';

// The hooks below run on the loader's own thread, which loads this file again: register once.
if (isMainThread) register(import.meta.url, { data: process.env.TASKLINE_LOADED });

let out;
export function initialize(file) {
  out = file;
}
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  appendFileSync(out, `${resolved.url}\n`);
  return resolved;
}
