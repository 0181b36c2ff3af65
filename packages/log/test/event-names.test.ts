// Log event names across the services' and packages' code: one spelling per event.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '@taskline/testing';

/** `<logger>.info('event'`, `.warn("event"`, ...: the first argument of a log call, when literal. */
const LOG_CALL = /\.(?:debug|info|warn|error)\(\s*(['"])([^'"]+)\1/g;

function sources(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist' || name === 'generated') continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sources(path, out);
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

function eventNames(): Map<string, Set<string>> {
  const byShape = new Map<string, Set<string>>();
  for (const group of ['packages', 'services'])
    for (const name of readdirSync(join(ROOT, group))) {
      const src = join(ROOT, group, name, 'src');
      if (!statSync(join(ROOT, group, name)).isDirectory()) continue;
      let files: string[];
      try {
        files = sources(src);
      } catch {
        continue; // a package without src/
      }
      for (const file of files)
        for (const [, , event] of readFileSync(file, 'utf8').matchAll(LOG_CALL)) {
          // Events that differ only in separators or case are one event spelled two ways.
          const shape = event!.toLowerCase().replace(/[\s_:-]+/g, '_');
          byShape.set(shape, (byShape.get(shape) ?? new Set()).add(event!));
        }
    }
  return byShape;
}

test('every log event is spelled one way across the code (shutting_down, never also shutting down)', () => {
  const names = eventNames();
  assert.ok(names.has('shutting_down'), 'the scan finds the services’ log calls');
  const twice = [...names.values()].filter((spellings) => spellings.size > 1).map((s) => [...s]);
  assert.deepEqual(twice, []);
});
