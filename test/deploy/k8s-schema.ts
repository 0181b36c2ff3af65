import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import type { Manifest } from './helm-tool.js';

/**
 * Validation of rendered objects against the Kubernetes 1.35 API and the KEDA and
 * prometheus-operator CRDs, from the `kubernetes-models` packages. Their validators check types,
 * enums and required fields but accept unknown fields (a misspelt or misplaced key Kubernetes would
 * drop or refuse); so each object is also type-checked as an object literal of the package's
 * interface, where TypeScript's excess-property check refuses an unknown field at any depth.
 */
const HERE = new URL('.', import.meta.url).pathname;

function moduleOf(m: Manifest): string {
  const [group, version] = m.apiVersion.includes('/') ? m.apiVersion.split('/') : ['', m.apiVersion];
  if (group === 'gateway.networking.k8s.io')
    return `@kubernetes-models/gateway-api/${group}/${version}/${m.kind}`;
  if (group === 'keda.sh') return `@kubernetes-models/keda/${group}/${version}/${m.kind}`;
  if (group === 'monitoring.coreos.com')
    return `@kubernetes-models/prometheus-operator/${group}/${version}/${m.kind}`;
  return `kubernetes-models/${group ? `${group}/` : ''}${version}/${m.kind}`;
}

type ModelClass = new (data: unknown) => { validate(): void };

/** Errors of the packages' validators, one line per failing object. */
async function schemaErrors(ms: Manifest[]): Promise<string[]> {
  const errors: string[] = [];
  for (const m of ms) {
    const models = (await import(moduleOf(m)).catch(() => ({}))) as Record<string, ModelClass>;
    const Model = models[m.kind];
    if (!Model) {
      errors.push(`${m.kind} ${m.metadata.name}: no schema for ${m.apiVersion}`);
      continue;
    }
    try {
      new Model(m).validate();
    } catch (err) {
      errors.push(`${m.kind} ${m.metadata.name}: ${(err as Error).message}`);
    }
  }
  return errors;
}

/** Fields no schema knows, from one TypeScript check of every object (one line per field). */
function unknownFields(ms: Manifest[]): string[] {
  const dir = join(HERE, 'node_modules/.cache');
  mkdirSync(dir, { recursive: true });
  const tmp = mkdtempSync(join(dir, 'strict-'));
  try {
    const file = join(tmp, 'objects.ts');
    const lines = ms.map(
      (m, i) =>
        `import type { I${m.kind} as T${i} } from '${moduleOf(m)}';\n` +
        `export const o${i}: T${i} = ${JSON.stringify(m)};`,
    );
    writeFileSync(file, lines.join('\n'));
    const program = ts.createProgram([file], {
      noEmit: true,
      strict: true,
      skipLibCheck: true,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
    });
    return ts.getPreEmitDiagnostics(program).map((d) => {
      const text = ts.flattenDiagnosticMessageText(d.messageText, '\n');
      const line = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line : -1;
      const m = ms[Math.floor(line / 2)];
      return `${m ? `${m.kind} ${m.metadata.name}` : '?'}: ${text.split('\n').pop()}`;
    });
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** Every problem of `ms` against the schemas; empty when all are valid. */
export async function schemaProblems(ms: Manifest[]): Promise<string[]> {
  return [...(await schemaErrors(ms)), ...unknownFields(ms)];
}
