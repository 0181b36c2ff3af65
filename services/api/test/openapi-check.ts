import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

/** The committed OpenAPI document, and ajv (JSON Schema 2020-12, OpenAPI 3.1's dialect) over it. */
export const openapiDoc = JSON.parse(readFileSync(new URL('../openapi.json', import.meta.url), 'utf8')) as {
  paths: Record<string, Record<string, { responses: Record<string, ResponseSpec> }>>;
  components: { responses: Record<string, ResponseSpec> };
};

interface ResponseSpec {
  headers?: Record<string, { required?: boolean; $ref?: string }>;
  content?: Record<string, { schema: unknown; 'x-event-schema'?: { $ref: string } }>;
}

const ajv = new Ajv2020({ strict: false, allErrors: true });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);
ajv.addSchema(openapiDoc, 'openapi.json');

/** Checks the document itself against the official OpenAPI 3.1 schema (a maintained ajv-based validator). */
export async function validateDocument(): Promise<void> {
  const validator = new Validator();
  const result = await validator.validate(structuredClone(openapiDoc));
  assert.equal(validator.version, '3.1');
  assert.ok(result.valid, JSON.stringify(result.errors, null, 1));
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

/** The documented response for a request: its operation's, or a shared one for unknown routes and methods. */
function responseOf(
  method: string,
  path: string,
  status: string,
): { spec: ResponseSpec; pointer: string; name: string } {
  let pathMatched = false;
  for (const [template, item] of Object.entries(openapiDoc.paths)) {
    const re = new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`);
    if (!re.test(path)) continue;
    pathMatched = true;
    const op = item[method.toLowerCase()];
    if (!op) continue;
    const spec = op.responses[status];
    assert.ok(spec, `${method} ${template} does not document status ${status}`);
    return {
      spec,
      pointer: `/paths/${esc(template)}/${method.toLowerCase()}/responses/${status}`,
      name: `${method} ${template}`,
    };
  }
  const shared = pathMatched ? 'MethodNotAllowed' : 'RouteNotFound';
  assert.equal(status, pathMatched ? '405' : '404', `${method} ${path} is not documented`);
  const spec = openapiDoc.components.responses[shared];
  assert.ok(spec, `components.responses.${shared} is documented`);
  return { spec, pointer: `/components/responses/${shared}`, name: `${method} ${path}` };
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
  const status = String(r.status);
  const { spec, pointer, name } = responseOf(r.method, new URL(r.url).pathname, status);
  for (const [header, h] of Object.entries(spec.headers ?? {})) {
    if (h.required) assert.ok(r.headers.get(header), `${name} ${status} lacks header ${header}`);
  }
  if (r.status === 204 || r.method === 'HEAD') return;
  const type = (r.headers.get('content-type') ?? '').split(';')[0]!.trim();
  assert.ok(spec.content?.[type], `${name} ${status} does not document ${type}`);
  const base = `${pointer}/content/${esc(type)}`;
  if (type === 'text/event-stream') {
    const v = validator(`${base}/x-event-schema`);
    for (const event of r.body as unknown[])
      assert.ok(v(event), `event ${JSON.stringify(event)}: ${ajv.errorsText(v.errors)}`);
    return;
  }
  const v = validator(`${base}/schema`);
  assert.ok(v(r.body), `${name} ${status}: ${ajv.errorsText(v.errors)} in ${JSON.stringify(r.body)}`);
}
