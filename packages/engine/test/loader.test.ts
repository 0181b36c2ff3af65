import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, test } from 'node:test';
import { defineScripts, timeRedisCommands } from '../src/index.js';
import { keyCount } from '../src/scripts.js';
import { harness, type Harness } from './helpers.js';

// The one loader, as another package uses it: a folder of its own, key counts from the headers.
let h: Harness;
const dir = mkdtempSync(join(tmpdir(), 'tl-lua-'));
const folder = pathToFileURL(`${dir}/`);
before(async () => (h = await harness()));
after(async () => {
  await h.close();
  rmSync(dir, { recursive: true, force: true });
});

writeFileSync(
  join(dir, 'probe_pair.lua'),
  `--[[
  Sets two keys to one value.

  KEYS[1] first  KEYS[2] second
  ARGV[1] value

  Returns the number of keys it was given.
]]
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[1])
return #KEYS
`,
);
writeFileSync(join(dir, 'headless.lua'), `-- KEYS: a\nreturn 1\n`);

test('a script takes as many keys as its header names, and metrics name it', async () => {
  const seen: string[] = [];
  timeRedisCommands(h.redis, (command) => seen.push(command));
  const { probe_pair } = defineScripts<'probe_pair', number>(h.redis, folder, ['probe_pair']);
  assert.equal(await probe_pair('{p}:a', '{p}:b', 'v'), 2);
  assert.equal(await h.redis.get('{p}:b'), 'v', 'the second key came from KEYS, not ARGV');
  assert.ok(seen.includes('tl_probe_pair'), `labelled by name, not as evalsha (${seen.join(', ')})`);
  assert.ok(!seen.includes('evalsha'), "!seen.includes('evalsha')");
});

test('a script without a header comment is refused when it is loaded', () => {
  assert.throws(() => defineScripts(h.redis, folder, ['headless']), /no header comment/);
});

test('every engine script has a header naming its keys', () => {
  const engine = new URL('../lua/', import.meta.url);
  const names = readdirSync(engine).filter((f) => f.endsWith('.lua') && !f.startsWith('_'));
  assert.ok(names.length > 10, 'names.length > 10');
  for (const file of names) {
    const text = readFileSync(new URL(file, engine), 'utf8');
    assert.notEqual(keyCount(file, text), 0, `${file} names its KEYS`);
  }
});
