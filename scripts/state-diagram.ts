// Writes the state diagram rendered from the engine's transition table into ARCHITECTURE.md.
import { readFileSync, writeFileSync } from 'node:fs';
import { renderStateDiagram } from '../packages/engine/src/states.js';

const file = new URL('../ARCHITECTURE.md', import.meta.url);
const block = /(<!-- state-diagram:start -->\n)[\s\S]*?(<!-- state-diagram:end -->)/;
const doc = readFileSync(file, 'utf8');
if (!block.test(doc)) throw new Error('ARCHITECTURE.md has no state-diagram block to fill');
writeFileSync(
  file,
  doc.replace(block, (_, start: string, end: string) => start + renderStateDiagram() + end),
);
