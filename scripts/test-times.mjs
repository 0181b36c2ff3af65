// A node:test reporter that appends one line per top-level test, `<ms>\t<file>`, to the file named
// by TASKLINE_TEST_TIMES as each ends: run_tests in scripts/test-tiers.sh sums them per file,
// slowest first, so a run shows where its minutes went. Written synchronously: --test-force-exit
// ends the run before a reporter's buffered output is flushed.
import { appendFileSync } from 'node:fs';
import { relative } from 'node:path';
import process from 'node:process';

export default async function* fileTimes(source) {
  const out = process.env.TASKLINE_TEST_TIMES;
  for await (const { type, data } of source) {
    if (out && (type === 'test:pass' || type === 'test:fail') && data.nesting === 0 && data.file)
      appendFileSync(
        out,
        `${Math.round(data.details?.duration_ms ?? 0)}\t${relative(process.cwd(), data.file)}\n`,
      );
  }
  yield '';
}
