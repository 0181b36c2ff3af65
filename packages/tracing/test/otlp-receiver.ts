// A small OTLP/HTTP receiver for tests: takes the real exporter's JSON at POST /v1/traces.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One received span, decoded from OTLP JSON (ids hex, attributes flattened to plain values). */
export interface ReceivedSpan {
  service: string;
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  kind: number;
  attributes: Record<string, unknown>;
  links: ReceivedLink[];
}

/** A span's link, its attributes flattened as a span's are. */
export interface ReceivedLink {
  traceId: string;
  spanId: string;
  attributes: Record<string, unknown>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}
interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}
interface OtlpSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  kind: number;
  attributes?: OtlpAttribute[];
  links?: { traceId: string; spanId: string; attributes?: OtlpAttribute[] }[];
}
interface OtlpRequest {
  resourceSpans: { resource: { attributes: OtlpAttribute[] }; scopeSpans: { spans: OtlpSpan[] }[] }[];
}

const plain = (v: OtlpValue): unknown =>
  v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.doubleValue ?? v.boolValue));
const attributes = (list: OtlpAttribute[] = []) =>
  Object.fromEntries(list.map((a) => [a.key, plain(a.value)]));

export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** Every request body as received: what must never hold prompt text. */
  readonly bodies: string[] = [];
  private constructor(private readonly server: Server) {}

  get endpoint(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  static async start(): Promise<OtlpReceiver> {
    const server = createServer();
    const receiver = new OtlpReceiver(server);
    server.on('request', (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString();
        if (req.method === 'POST' && req.url === '/v1/traces') receiver.take(body);
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return receiver;
  }

  private take(body: string): void {
    this.bodies.push(body);
    for (const rs of (JSON.parse(body) as OtlpRequest).resourceSpans) {
      const service = String(attributes(rs.resource.attributes)['service.name']);
      for (const ss of rs.scopeSpans)
        for (const s of ss.spans)
          this.spans.push({
            service,
            name: s.name,
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId ?? '',
            kind: s.kind,
            attributes: attributes(s.attributes),
            links: (s.links ?? []).map((l) => ({ ...l, attributes: attributes(l.attributes) })),
          });
    }
  }

  /** The spans of one trace. */
  trace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((s) => s.traceId === traceId);
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
