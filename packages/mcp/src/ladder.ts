// The protocol revisions `/mcp` serves, and what a 2026-era request with an unsupported one gets (-32022).
import type { Request } from 'express';
import {
  classifyInboundRequest,
  isJsonContentType,
  ProtocolError,
  UnsupportedProtocolVersionError,
} from '@modelcontextprotocol/server';
import { LEGACY_VERSIONS } from './legacy/wire.js';

/** The revisions the SDK's 2026 handler serves (its own list is not exported). */
const MODERN_VERSIONS = ['2026-07-28'];
/**
 * What -32022 lists as supported: every revision `/mcp` serves, the 2025 ones through
 * `initialize` (MCP 2026-07-28, Versioning: the versions the server supports).
 */
export const SUPPORTED_VERSIONS = [...MODERN_VERSIONS, ...LEGACY_VERSIONS];
/** MCP 2026-07-28, Versioning: UnsupportedProtocolVersionError. */
export const UNSUPPORTED_VERSION = -32022;
/** MCP 2026-07-28, Streamable HTTP: headers that contradict the body, or a required one missing. */
const HEADER_MISMATCH = -32020;

/** A JSON-RPC error and the HTTP status it goes out with. */
export interface Rejection {
  http: number;
  error: ProtocolError;
}

const header = (req: Request, name: string) => {
  const value = req.headers[name];
  return typeof value === 'string' ? value : undefined;
};

const missingHeader = (name: string, method: string) =>
  new ProtocolError(
    HEADER_MISMATCH,
    `Bad Request: the body names method ${method} but the required ${name} header is absent`,
    {
      mismatch: { header: '(missing)', body: `the required ${name} header is absent` },
    },
  );

/**
 * The SDK's checks of a 2026-07-28 request (Content-Type, envelope, MCP-Protocol-Version and
 * Mcp-Method present and agreeing with the body, a served revision), for the requests this layer
 * answers ahead of the SDK: without them a task listen naming revision 1999-01-01, or sent with
 * no MCP headers at all, was served. 'legacy' for a 2025-era request (no envelope), null when the
 * SDK would go on to serve it.
 */
export function modernRejection(req: Request): Rejection | 'legacy' | null {
  const route = classifyInboundRequest({
    httpMethod: req.method,
    protocolVersionHeader: header(req, 'mcp-protocol-version'),
    mcpMethodHeader: header(req, 'mcp-method'),
    mcpNameHeader: header(req, 'mcp-name'),
    body: req.body,
  });
  if (route.kind === 'legacy') return 'legacy';
  if (!isJsonContentType(header(req, 'content-type'))) {
    const error = new ProtocolError(-32000, 'Unsupported Media Type: Content-Type must be application/json');
    return { http: 415, error };
  }
  if (route.kind === 'reject') {
    return { http: route.httpStatus, error: new ProtocolError(route.code, route.message, route.data) };
  }
  const revision = route.classification.revision;
  if (revision === undefined || !MODERN_VERSIONS.includes(revision)) {
    const requested = revision ?? 'unknown';
    return {
      http: 400,
      error: new UnsupportedProtocolVersionError({ supported: SUPPORTED_VERSIONS, requested }),
    };
  }
  const method = route.message.method;
  if (header(req, 'mcp-protocol-version') === undefined)
    return { http: 400, error: missingHeader('MCP-Protocol-Version', method) };
  if (header(req, 'mcp-method') === undefined)
    return { http: 400, error: missingHeader('Mcp-Method', method) };
  return null;
}
