// `GET /metrics` and the HTTP request metrics middleware.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import type { BuildInfo } from './build.js';
import { openMetricsText, wantsOpenMetrics } from './exposition.js';
import type { TasklineMetrics } from './metrics.js';

/**
 * `GET /metrics` for Express (or plain node:http): the registry in the Prometheus text format, or in
 * OpenMetrics (with the latency histograms' trace exemplars) when the scrape's `Accept` prefers it.
 */
export function metricsHandler(registry: Registry) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    const openMetrics = wantsOpenMetrics(req.headers.accept);
    (openMetrics ? openMetricsText(registry) : registry.metrics()).then(
      (body) => {
        res.statusCode = 200;
        res.setHeader('Content-Type', openMetrics ? Registry.OPENMETRICS_CONTENT_TYPE : registry.contentType);
        res.setHeader('Vary', 'Accept');
        res.end(body);
      },
      (err: unknown) => {
        res.statusCode = 500;
        res.setHeader('Content-Type', 'text/plain; charset=utf-8');
        res.end(`metrics collection failed: ${err instanceof Error ? err.message : String(err)}\n`);
      },
    );
  };
}

/** What the middleware reads from an Express request; plain node:http requests have none of it. */
interface RoutedRequest extends IncomingMessage {
  baseUrl?: string;
  route?: { path?: unknown };
}

/** Label for a request no route matched (404s, probes): one value, so scanners cannot add series. */
export const UNMATCHED_ROUTE = 'unmatched';

export interface HttpMetricsOptions {
  /** The route label of a request; defaults to Express's `baseUrl + route.path`, else `unmatched`. */
  route?: (req: RoutedRequest) => string | undefined;
}

function expressRoute(req: RoutedRequest): string | undefined {
  const path = req.route?.path;
  return typeof path === 'string' ? `${req.baseUrl ?? ''}${path}` : undefined;
}

/**
 * Express middleware counting every request and timing it by route pattern, method and status.
 * Event streams are counted but not timed: their duration is the client's choice and would
 * swamp the latency histogram.
 */
export function httpMetrics(metrics: TasklineMetrics, options: HttpMetricsOptions = {}) {
  const routeOf = options.route ?? expressRoute;
  return (req: RoutedRequest, res: ServerResponse, next: () => void): void => {
    const started = process.hrtime.bigint();
    // Read the route now as well: nested routers restore baseUrl before the response ends.
    let route = routeOf(req);
    res.once('close', () => {
      route = routeOf(req) ?? route ?? UNMATCHED_ROUTE;
      const labels = { route, method: req.method ?? 'UNKNOWN', status: String(res.statusCode) };
      metrics.httpRequestsTotal.inc(labels);
      const type = res.getHeader('content-type');
      if (typeof type === 'string' && type.startsWith('text/event-stream')) return;
      metrics.httpRequestDurationSeconds.observe(labels, Number(process.hrtime.bigint() - started) / 1e9);
    });
    next();
  };
}

export interface MetricsServer {
  readonly port: number;
  close(): Promise<void>;
}

/** `/healthz` and `/readyz` of a service whose only listener is its metrics port. */
export interface ProbeHandlers {
  /** Answered by `/healthz` while the process serves requests at all. */
  build: BuildInfo;
  /** null when ready, else why not (e.g. Redis unreachable). */
  notReady(): Promise<string | null>;
}

/** A readiness check that has not answered by then counts as not ready: a probe must not hang. */
const READY_CHECK_MS = 1000;

const json = (res: ServerResponse, status: number, body: unknown) => {
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json');
  res.end(JSON.stringify(body));
};

/** Answers a probe path; false when `path` is none. */
function answerProbe(path: string, probes: ProbeHandlers, service: string, res: ServerResponse): boolean {
  if (path === '/healthz') {
    json(res, 200, { status: 'ok', service, ...probes.build });
    return true;
  }
  if (path !== '/readyz') return false;
  const late = new Promise<string>((r) => setTimeout(r, READY_CHECK_MS, 'readiness check timed out').unref());
  Promise.race([probes.notReady(), late]).then(
    (reason) =>
      json(
        res,
        reason ? 503 : 200,
        reason ? { error: { code: 'not_ready', message: reason } } : { status: 'ok' },
      ),
    (err: unknown) => json(res, 503, { error: { code: 'not_ready', message: String(err) } }),
  );
  return true;
}

/**
 * A small HTTP server exposing `/metrics`, for services without an HTTP API of their own
 * (scheduler, gpu-worker), and with `probes` their `/healthz` and `/readyz` (the chart's probes).
 * Port 0 picks a free port.
 */
export async function startMetricsServer(options: {
  metrics: TasklineMetrics;
  port: number;
  host?: string;
  probes?: ProbeHandlers;
  /** How long an idle scrape connection stays open (TASKLINE_HTTP_KEEPALIVE_MS); Node.js's 5 s when unset. */
  keepAliveMs?: number;
}): Promise<MetricsServer> {
  const handler = metricsHandler(options.metrics.registry);
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    const read = req.method === 'GET' || req.method === 'HEAD';
    if (path === '/metrics' && read) return handler(req, res);
    if (read && options.probes && answerProbe(path, options.probes, options.metrics.service, res)) return;
    const known = path === '/metrics' || (options.probes && (path === '/healthz' || path === '/readyz'));
    json(res, known ? 405 : 404, { error: { code: known ? 'method_not_allowed' : 'not_found' } });
  });
  if (options.keepAliveMs !== undefined) server.keepAliveTimeout = options.keepAliveMs;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '0.0.0.0', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        // Listening stops first, then every connection goes: the other order leaves a window in
        // which a new connection keeps the close waiting.
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
